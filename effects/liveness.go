package effects

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/service"
)

// ReactorLockNamespace is the first key of every reactor's liveness lock,
// pg_advisory_lock(ReactorLockNamespace, hashtext(reactor id)), apart from the session mutex's
// and Reckon's other locks.
const ReactorLockNamespace int32 = 0x52434b52 // "RCKR"

// reactorLock is the liveness lock of the reactor with the given id.
func reactorLock(id string) postgres.AdvisoryLock {
	return postgres.AdvisoryLock{Namespace: ReactorLockNamespace, Name: id}
}

// forgetEvery is how often a started client deletes the registrations of reactors long gone.
const forgetEvery = time.Hour

// unregisteredEvery is how often a started client looks for running jobs left by River clients
// that are not registered reactors (takeOverUnregistered).
const unregisteredEvery = 5 * time.Second

// reconnectDelay is how long the liveness loop waits between attempts to get its lock back after
// its connection died.
const reconnectDelay = 250 * time.Millisecond

// liveness is a started client's life as a reactor on the database (docs/design.md, "Dead
// reactors"). It holds the reactor's lock on a connection of its own — Postgres frees it the
// moment the process or that connection dies — and writes a heartbeat on it every
// Config.LivenessInterval. On the same tick it looks for reactors that River says run jobs of the
// queue but whose lock is free, and once a lock has stayed free for Config.TakeoverGrace it hands
// their running jobs back to River (takeOver).
//
// A reactor whose connection died while the process lives takes its lock back as soon as it can.
// If it finds that another reactor took it for dead meanwhile, its jobs were handed to others:
// it stops its River client at once (cancelling the work in flight) and reports ErrPresumedDead
// on Client.Fatal.
type liveness struct {
	c    *Client
	conn *pgx.Conn // holds the lock; nil while it is being got back

	suspects map[string]time.Time // reactor id → when its lock was first found free
	fatal    chan error           // Client.Fatal: at most one error
}

// livenessService is the reactor's liveness as a service of the started client (lifecycle.go).
// It comes before River in the client's services: it holds the lock and beats while River starts,
// drains and stops — a reactor that stopped beating while its workers drain would be taken for
// dead by the others.
type livenessService struct {
	c    *Client
	live *liveness // of the last Start
	loop *service.Loop
}

// Start takes the reactor's lock, registers it (startLiveness) and starts beating.
func (s *livenessService) Start(ctx context.Context) error {
	live, err := s.c.startLiveness(ctx)
	if err != nil {
		return err
	}
	s.live = live
	s.loop = service.NewLoop(live.run)
	return s.loop.Start(ctx)
}

// Stop ends the beating, then hands back the jobs still running under the reactor's id,
// unregisters it and frees its lock (liveness.shutdown).
func (s *livenessService) Stop(ctx context.Context) error {
	_ = s.loop.Stop(ctx)
	s.live.shutdown(ctx)
	return nil
}

// startLiveness takes the reactor's lock, hands back the running jobs that a predecessor under
// the same id left (River has not started, so none is this process's), and registers the
// reactor. It fails when a live process holds the id.
func (c *Client) startLiveness(ctx context.Context) (*liveness, error) {
	l := &liveness{c: c, suspects: map[string]time.Time{}, fatal: c.fatal}
	if err := l.lock(ctx); err != nil {
		return nil, err
	}
	taken, err := c.takeOver(ctx, c.config.ID, "a process under the same id died before this one started")
	if err == nil && taken > 0 {
		c.logger.InfoContext(ctx, "took over the jobs left by this reactor id's previous process", slog.Int("jobs", taken))
	}
	if err == nil {
		_, err = c.queries.ReactorRegister(ctx, dbsqlc.ReactorRegisterParams{ID: c.config.ID, Queue: c.config.Queue})
	}
	if err != nil {
		l.close()
		return nil, fmt.Errorf("effects: register reactor %s: %w", c.config.ID, err)
	}
	return l, nil
}

// lock connects and takes the reactor's lock, or fails with a clear error if a live process holds
// it.
func (l *liveness) lock(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.c.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("effects: reactor %s: liveness connection: %w", l.c.config.ID, err)
	}
	locked, err := reactorLock(l.c.config.ID).TryLock(ctx, conn)
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("effects: reactor %s: take liveness lock: %w", l.c.config.ID, err)
	}
	if !locked {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("%w: %q", errReactorIDInUse, l.c.config.ID)
	}
	l.conn = conn
	return nil
}

// errReactorIDInUse: the lock is held, by a live process with the same Config.ID or by a reactor
// that is taking this id's jobs over right now.
var errReactorIDInUse = errors.New("effects: reactor id held by a live process (every process needs its own Config.ID)")

// run beats and takes over dead reactors' jobs every LivenessInterval until ctx ends.
func (l *liveness) run(ctx context.Context) {
	ticker := time.NewTicker(l.c.config.LivenessInterval)
	defer ticker.Stop()
	lastForget, lastUnregistered := time.Time{}, time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := l.beat(ctx); err != nil {
			if errors.Is(err, ErrPresumedDead) {
				l.die(ctx, err)
				return
			}
			if ctx.Err() == nil {
				l.c.logger.WarnContext(ctx, "reactor heartbeat failed again; trying at the next tick", slog.String("error", err.Error()))
			}
			continue
		}
		if err := l.takeOverDead(ctx); err != nil && ctx.Err() == nil {
			l.c.logger.WarnContext(ctx, "take over dead reactors", slog.String("error", err.Error()))
		}
		if time.Since(lastUnregistered) > unregisteredEvery {
			lastUnregistered = time.Now()
			if err := l.c.takeOverUnregistered(ctx); err != nil && ctx.Err() == nil {
				l.c.logger.WarnContext(ctx, "take over the jobs of unregistered River clients", slog.String("error", err.Error()))
			}
		}
		if time.Since(lastForget) > forgetEvery {
			lastForget = time.Now()
			if _, err := l.c.forgetGone(ctx); err != nil && ctx.Err() == nil {
				l.c.logger.WarnContext(ctx, "forget long-gone reactors", slog.String("error", err.Error()))
			}
		}
	}
}

// forgetGone deletes, in one transaction, the registrations of the reactors not heard from for a
// day whose liveness lock it takes (a transaction lock: a reactor restarted under the same id
// waits for the commit, then registers afresh), and returns how many.
func (c *Client) forgetGone(ctx context.Context) (int64, error) {
	return inTx(ctx, c, func(tx pgx.Tx) (int64, error) {
		q := dbsqlc.New(tx)
		ids, err := q.ReactorListForgotten(ctx)
		if err != nil {
			return 0, err
		}
		var forgotten int64
		for _, id := range ids {
			free, err := reactorLock(id).TryLockTx(ctx, tx)
			if err != nil {
				return 0, err
			}
			if !free {
				continue
			}
			n, err := q.ReactorDeleteForgotten(ctx, id)
			if err != nil {
				return 0, err
			}
			forgotten += n
		}
		return forgotten, nil
	})
}

// beat writes the heartbeat on the lock's connection, getting the connection and the lock back
// first if they died. ErrPresumedDead: another reactor took this one for dead meanwhile.
func (l *liveness) beat(ctx context.Context) error {
	err := l.beatOnce(ctx)
	if err == nil || errors.Is(err, ErrPresumedDead) || ctx.Err() != nil {
		return err
	}
	// The connection (and with it the lock) is probably gone: get it back at once rather than at
	// the next tick, so that the others do not see the lock free for long.
	l.c.logger.WarnContext(ctx, "reactor heartbeat failed; getting the liveness lock back", slog.String("error", err.Error()))
	return l.beatOnce(ctx) // beatOnce closed the dead connection
}

func (l *liveness) beatOnce(ctx context.Context) error {
	if l.conn == nil || l.conn.IsClosed() {
		l.close()
		for {
			err := l.lock(ctx)
			if err == nil {
				l.c.logger.InfoContext(ctx, "reactor liveness lock held again", slog.String("reactor_id", l.c.config.ID))
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// The lock may be held for a moment by a reactor that is taking this one over; its
			// mark is read below once the lock is ours again.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(reconnectDelay):
			}
		}
	}
	beatCtx, cancel := context.WithTimeout(ctx, max(l.c.config.LivenessInterval, time.Second))
	defer cancel()
	deadAt, err := dbsqlc.New(l.conn).ReactorHeartbeat(beatCtx, l.c.config.ID)
	switch {
	case postgres.NoRows(err):
		// Forgotten (a day without a heartbeat): register again; nothing was taken over.
		_, err = dbsqlc.New(l.conn).ReactorRegister(beatCtx, dbsqlc.ReactorRegisterParams{ID: l.c.config.ID, Queue: l.c.config.Queue})
		return err
	case err != nil:
		l.close() // the next beat connects again
		return err
	case deadAt != nil:
		return fmt.Errorf("%w (at %s)", ErrPresumedDead, deadAt.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// die stops the reactor's work after it was taken for dead: its running jobs belong to other
// reactors now.
func (l *liveness) die(ctx context.Context, err error) {
	l.c.logger.ErrorContext(ctx, "this reactor lost its database connection and was taken for dead; its jobs were "+
		"handed to other reactors: stopping its work (restart the process)", slog.String("reactor_id", l.c.config.ID), slog.String("error", err.Error()))
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if stopErr := l.c.river.StopAndCancel(stopCtx); stopErr != nil {
		l.c.logger.ErrorContext(ctx, "stop work after being taken for dead", slog.String("error", stopErr.Error()))
	}
	l.close()
	select {
	case l.fatal <- err:
	default:
	}
}

// shutdown, once its loop has ended after River stopped, hands back the jobs still running under
// the reactor's id, unregisters it and frees the lock (closing the connection).
func (l *liveness) shutdown(ctx context.Context) {
	if l.conn != nil && !l.conn.IsClosed() {
		taken, err := l.c.takeOver(ctx, l.c.config.ID, "worker did not finish before its reactor stopped")
		if err == nil {
			if taken > 0 {
				l.c.logger.WarnContext(ctx, "handed back jobs still running at stop", slog.Int("jobs", taken))
			}
			err = dbsqlc.New(l.conn).ReactorUnregister(ctx, l.c.config.ID)
		}
		if err != nil {
			l.c.logger.WarnContext(ctx, "unregister reactor", slog.String("error", err.Error()))
		}
		l.unlock()
	}
	l.close()
}

// unlock releases the reactor's lock before its connection closes. Closing alone frees it only
// once the server process of the connection has exited, a moment after Stop returns: a Start that
// follows at once (a client restarted, a process under the same id) would find the id held. A
// failure is left to the close.
func (l *liveness) unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := reactorLock(l.c.config.ID).Unlock(ctx, l.conn); err != nil {
		l.c.logger.WarnContext(ctx, "release the liveness lock", slog.String("error", err.Error()))
	}
}

func (l *liveness) close() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}

// takeOverDead hands back the running jobs of every registered reactor whose lock has been free
// for TakeoverGrace.
func (l *liveness) takeOverDead(ctx context.Context) error {
	// River's tables and Reckon's are read apart: a Citus cell keeps them on different nodes.
	running, err := l.c.queries.RiverJobRunningOwners(ctx, l.c.config.Queue)
	if err != nil {
		return fmt.Errorf("list reactors running jobs: %w", err)
	}
	owners, err := l.c.queries.ReactorListRunningJobOwners(ctx, dbsqlc.ReactorListRunningJobOwnersParams{
		Self: l.c.config.ID, Owners: running, SilentMs: int32(l.c.config.HeartbeatTimeout / time.Millisecond),
	})
	if err != nil {
		return fmt.Errorf("list reactors running jobs: %w", err)
	}
	listed := map[string]bool{}
	var errs []error
	for _, owner := range owners {
		listed[owner.ID] = true
		if owner.Silent {
			l.endSilent(ctx, owner.ID, owner.HeartbeatAt)
		}
		if err := l.takeOverIfDead(ctx, owner.ID); err != nil {
			errs = append(errs, fmt.Errorf("reactor %s: %w", owner.ID, err))
		}
	}
	for id := range l.suspects {
		if !listed[id] {
			delete(l.suspects, id) // no running job left: nothing to take over
		}
	}
	return errors.Join(errs...)
}

// endSilent ends the database connection that holds the lock of a reactor that has written no
// heartbeat for HeartbeatTimeout. A process that dies frees its lock at once, but a host that
// vanishes (power, network) leaves its connection open on the server until TCP keepalives notice,
// which by default takes hours; ending it frees the lock, and the takeover follows. Should the
// reactor be alive after all, it finds itself taken for dead when it reconnects and stops.
func (l *liveness) endSilent(ctx context.Context, owner string, lastBeat time.Time) {
	ended, err := l.c.queries.ReactorEndSilentConnection(ctx, dbsqlc.ReactorEndSilentConnectionParams{Namespace: ReactorLockNamespace, ID: owner})
	if err != nil {
		l.c.logger.WarnContext(ctx, "end the connection of a silent reactor (the role needs pg_signal_backend, or to be the reactor's role)",
			slog.String("reactor_id", owner), slog.String("error", err.Error()))
		return
	}
	if ended > 0 {
		l.c.logger.WarnContext(ctx, "ended the database connection of a reactor silent for too long; its jobs will be taken over",
			slog.String("reactor_id", owner), slog.Time("last_heartbeat", lastBeat))
	}
}

// takeOverIfDead takes over owner's running jobs, and ends its River leadership, if its lock is
// free and has been since a check at least TakeoverGrace ago. The lock is held for the takeover's
// transaction, so the owner cannot get it back (and go on) in the middle.
func (l *liveness) takeOverIfDead(ctx context.Context, owner string) error {
	c := l.c
	var (
		taken    []dbsqlc.RiverJobTakeOverRow
		resigned int64
		lastBeat time.Time
	)
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		taken, resigned = nil, 0
		q := dbsqlc.New(tx)
		// Free means the owner is gone (its process or its connection died), and it cannot come
		// back before this transaction ends.
		free, err := reactorLock(owner).TryLockTx(ctx, tx)
		if err != nil {
			return err
		}
		if !free {
			delete(l.suspects, owner)
			return nil
		}
		first, seen := l.suspects[owner]
		if !seen {
			first = time.Now()
			l.suspects[owner] = first
		}
		if time.Since(first) < c.config.TakeoverGrace {
			return nil // free, but not for long enough: a reactor reconnecting after a Postgres restart gets its lock back
		}
		taken, err = takeOverTx(ctx, q, c.config.Queue, owner, "reactor "+owner+" died (its liveness lock is free); taken over by "+c.config.ID)
		if err != nil {
			return err
		}
		c.freePlacesOf(ctx, tx, jobIDsOf(taken))
		if resigned, err = q.ReactorResignLeadership(ctx, owner); err != nil {
			return fmt.Errorf("end its River leadership: %w", err)
		}
		if resigned > 0 {
			if err := q.ReactorNotifyResigned(ctx, owner); err != nil {
				return fmt.Errorf("announce the end of its River leadership: %w", err)
			}
		}
		mark, err := q.ReactorMarkDead(ctx, dbsqlc.ReactorMarkDeadParams{ID: owner, TakenOverBy: c.config.ID, Jobs: int32(len(taken))})
		if err != nil {
			return fmt.Errorf("mark dead: %w", err)
		}
		lastBeat = mark.HeartbeatAt
		return nil
	})
	if err != nil || (len(taken) == 0 && resigned == 0) {
		return err
	}
	delete(l.suspects, owner)
	if resigned > 0 {
		c.logger.InfoContext(ctx, "ended the River leadership of a dead reactor: a live one is elected now",
			slog.String("dead_reactor_id", owner))
	}
	if len(taken) > 0 {
		c.observeTakeover(ctx, owner, taken, time.Since(lastBeat))
	}
	return nil
}

// jobIDsOf returns the ids of jobs taken over.
func jobIDsOf(taken []dbsqlc.RiverJobTakeOverRow) []int64 {
	ids := make([]int64, len(taken))
	for i, job := range taken {
		ids[i] = job.ID
	}
	return ids
}

// takeOver hands back owner's running jobs in a transaction of its own (used for this reactor's
// own id, whose lock this process holds).
func (c *Client) takeOver(ctx context.Context, owner, reason string) (int, error) {
	var taken []dbsqlc.RiverJobTakeOverRow
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		taken, err = takeOverTx(ctx, dbsqlc.New(tx), c.config.Queue, owner, reason+"; taken over by "+c.config.ID)
		if err == nil {
			c.freePlacesOf(ctx, tx, jobIDsOf(taken))
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if len(taken) > 0 {
		c.observeTakeover(ctx, owner, taken, -1)
	}
	return len(taken), nil
}

// takeOverUnregistered hands back the running jobs of the queue left by River clients that are not
// registered reactors — reactors of a version before registration (migration 0010), killed or
// stopped during or before an upgrade — once no live client can be running them: past the call
// timeout in the job's args plus InFlightMargin, when River has cancelled any live run of it (see
// RiverJobTakeOverUnregistered and docs/design.md, "Dead reactors"). Such a client holds no
// liveness lock, so its life cannot be tested; the job's own deadline stands in for it. Dispatch,
// reconcile and deadline jobs only; turn jobs of such a client are left to River's rescuer.
func (c *Client) takeOverUnregistered(ctx context.Context) error {
	var taken []dbsqlc.RiverJobTakeOverUnregisteredRow
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		registered, err := q.ReactorListIDs(ctx)
		if err != nil {
			return fmt.Errorf("list reactors: %w", err)
		}
		taken, err = q.RiverJobTakeOverUnregistered(ctx, dbsqlc.RiverJobTakeOverUnregisteredParams{
			Registered: registered,
			Queue:      c.config.Queue,
			Kinds:      []string{dispatchArgs{}.Kind(), reconcileArgs{}.Kind(), deadlineArgs{}.Kind()},
			MarginMs:   c.config.InFlightMargin.Milliseconds(),
			Error: " is not a registered reactor (a version before reactor registration) and this run is past its " +
				"timeout plus the in-flight margin; taken over by " + c.config.ID,
		})
		if err != nil {
			return fmt.Errorf("hand back jobs: %w", err)
		}
		for _, job := range taken {
			if job.State == dbsqlc.RiverJobStateAvailable {
				if err := q.RiverNotifyInsert(ctx, c.config.Queue); err != nil {
					return fmt.Errorf("notify queue: %w", err)
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	byOwner := map[string][]dbsqlc.RiverJobTakeOverRow{}
	for _, job := range taken {
		byOwner[job.Owner] = append(byOwner[job.Owner], dbsqlc.RiverJobTakeOverRow{
			ID: job.ID, Kind: job.Kind, State: job.State, AttemptedAt: job.AttemptedAt,
		})
	}
	for owner, jobs := range byOwner {
		c.observeTakeover(ctx, owner, jobs, -1)
	}
	return nil
}

// takeOverTx hands owner's running jobs of queue back to River and wakes the queue's fetchers.
func takeOverTx(ctx context.Context, q *dbsqlc.Queries, queue, owner, reason string) ([]dbsqlc.RiverJobTakeOverRow, error) {
	taken, err := q.RiverJobTakeOver(ctx, dbsqlc.RiverJobTakeOverParams{Queue: queue, Owner: owner, Error: reason})
	if err != nil {
		return nil, fmt.Errorf("hand back jobs: %w", err)
	}
	for _, job := range taken {
		if job.State == dbsqlc.RiverJobStateAvailable {
			if err := q.RiverNotifyInsert(ctx, queue); err != nil {
				return nil, fmt.Errorf("notify queue: %w", err)
			}
			break
		}
	}
	return taken, nil
}

// observeTakeover counts and logs the jobs taken over from owner; sinceBeat < 0 when the time of
// death is not known.
func (c *Client) observeTakeover(ctx context.Context, owner string, taken []dbsqlc.RiverJobTakeOverRow, sinceBeat time.Duration) {
	kinds := map[string]int{}
	for _, job := range taken {
		kinds[job.Kind]++
		c.metrics.takenOver.WithLabelValues(job.Kind).Inc()
	}
	attrs := []any{slog.String("dead_reactor_id", owner), slog.Int("jobs", len(taken)), slog.Any("kinds", kinds)}
	if sinceBeat >= 0 {
		c.metrics.takeoverSeconds.Observe(sinceBeat.Seconds())
		attrs = append(attrs, slog.Duration("since_last_heartbeat", sinceBeat))
	}
	c.logger.InfoContext(ctx, "took over the running jobs of a dead reactor", attrs...)
}
