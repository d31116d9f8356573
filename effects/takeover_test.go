package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// noSweep keeps the sweeper out of a takeover test: with an in-flight margin of a minute, nothing
// but the takeover can finish a dead reactor's work within the test's bounds.
func noSweep(c *effects.Config) { c.InFlightMargin = time.Minute }

// startHolder starts a reactor process that will hold a job at a bank checkpoint, with the same
// minute of in-flight margin and a bank connector whose calls time out after callTimeout.
func (h *harness) startHolder(callTimeout time.Duration) *proctest.Process {
	h.t.Helper()
	return testkit.StartChild(h.t,
		childReactorEnv+"=1",
		"CHILD_IN_FLIGHT_MARGIN=1m",
		"CHILD_CALL_TIMEOUT="+callTimeout.String(),
		"DATABASE_URL="+h.pool.Config().ConnString(),
		"BANK_URL="+h.bank.URL(),
	)
}

// A reactor is SIGKILLed while it holds a batch dispatch job, one wire of which the bank performed
// but the reactor never recorded; the rest of the batch was recorded. A live reactor hands the
// job back within seconds (not at River's rescue, an hour later); its second run makes the
// unrecorded non-idempotent wire UNKNOWN and resolves it by status check: every wire performed
// exactly once.
func TestTakeoverOfDispatchBatch(t *testing.T) {
	t.Parallel()
	h := setup(t, noSweep)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Checkpoints: true, Timeout: 5 * time.Second})
	prefix := fmt.Sprintf("batch-%d", time.Now().UnixNano())
	held := prefix + "-0"
	reached := h.bank.ArmKey("after-call", held)
	holder := h.startHolder(30 * time.Second)

	var batch []*effects.Effect
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		specs := make([]effects.Spec, 4)
		for i := range specs {
			specs[i] = effects.Spec{Connector: "bank.wire", IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
				Args: map[string]any{"account": "acct-1", "amount": 100 + i}}
		}
		var err error
		batch, err = h.client.EnqueueManyTx(context.Background(), tx, specs, nil)
		return err
	}))
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the holder never reached the checkpoint\n%s", holder.Stderr())
	}
	jobID := h.jobOf(batch[0].ID)
	for _, e := range batch[1:] { // the rest of the batch is recorded while one wire is held
		require.Eventually(t, func() bool { return h.state(e.ID) == effects.StateConfirmed }, 10*time.Second, 10*time.Millisecond)
	}
	h.start() // the live reactor

	testkit.KillAndAwaitTakeover(t, h.pool, holder, jobID, h.client.ID())
	done := h.wait(batch[0].ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(batch[0].ID))
	for i := range batch {
		require.Equal(t, 1, h.bank.Count(fmt.Sprintf("%s-%d", prefix, i)), "wire %d performed exactly once", i)
	}
	testkit.RequireNoRunningJobs(t, h.pool)
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_dispatch"}))
}

// A reactor is SIGKILLed while its reconcile job asks the bank about an UNKNOWN wire (the call
// had timed out and performed nothing). A live reactor hands the reconcile job back within
// seconds; its run finds the wire absent, sends it again once, and confirms it.
func TestTakeoverOfReconcile(t *testing.T) {
	t.Parallel()
	h := setup(t, noSweep)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Checkpoints: true, Timeout: time.Second})
	key := fmt.Sprintf("reconcile-%d", time.Now().UnixNano())
	h.bank.Script(key, fakebank.Timeout)
	reached := h.bank.ArmKey("before-status", key)
	// The holder's calls time out after 3 s: its status check is held at the checkpoint until
	// then, and the live reactor must start and the holder be killed within that (1 s was too
	// little on a loaded CI machine).
	holder := h.startHolder(3 * time.Second)
	effect := h.enqueue("bank.wire", key, 300)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the holder never reached the status check\n%s", holder.Stderr())
	}
	require.Equal(t, effects.StateUnknown, h.state(effect.ID))
	h.start()

	testkit.KillAndAwaitTakeover(t, h.pool, holder, h.jobOf(effect.ID), h.client.ID())
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 1, h.bank.Count(key))
	testkit.RequireNoRunningJobs(t, h.pool)
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_reconcile"}))
}

// A live reactor never takes over the jobs of another live reactor, however long they run: the
// holder's job stays its own while it lives (it holds its liveness lock), and is handed back once
// it dies.
func TestNoTakeoverWhileTheHolderLives(t *testing.T) {
	t.Parallel()
	h := setup(t, noSweep)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Checkpoints: true, Timeout: 30 * time.Second})
	key := fmt.Sprintf("alive-%d", time.Now().UnixNano())
	reached := h.bank.ArmKey("before-call", key)
	holder := h.startHolder(time.Minute)
	effect := h.enqueue("bank.wire", key, 100)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the holder never reached the checkpoint\n%s", holder.Stderr())
	}
	h.start()
	jobID := h.jobOf(effect.ID)
	// Three times the takeover bound of a dead reactor (LivenessInterval × 2 + TakeoverGrace).
	time.Sleep(3 * 4 * time.Second)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running' AND attempt = 1`, jobID),
		"the live holder's job was left alone")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_reactors WHERE dead_at IS NOT NULL`))
	require.Equal(t, 0.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_dispatch"}))

	testkit.KillAndAwaitTakeover(t, h.pool, holder, jobID, h.client.ID())
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	require.Equal(t, 1, h.bank.Count(key))
	testkit.RequireNoRunningJobs(t, h.pool)
}

// Two processes cannot run as reactors under one id: the second Start fails and names the id.
func TestReactorIDInUse(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *effects.Config) { c.ID = "twin-" + uuid.NewString() })
	h.start()
	config := testkit.FastConfig(h.registry)
	config.ID = h.client.ID()
	twin, err := effects.NewClient(h.pool, config)
	require.NoError(t, err)
	err = twin.Start(context.Background())
	require.ErrorContains(t, err, "reactor id held by a live process")
	require.ErrorContains(t, err, h.client.ID())
}

func (h *harness) state(id uuid.UUID) effects.State {
	h.t.Helper()
	e, err := h.client.Get(context.Background(), id)
	require.NoError(h.t, err)
	return e.State
}

// jobOf returns the River job the effect belongs to now.
func (h *harness) jobOf(id uuid.UUID) int64 {
	h.t.Helper()
	var jobID int64
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT job_id FROM reckon_effects WHERE id = $1`, id).Scan(&jobID))
	return jobID
}

// holdingAsyncConnector is an async connector whose upstream accepts at once and whose Cancel
// visits the bank's "before-cancel" checkpoint (keyed by the effect's idempotency key) before it
// succeeds, so that a test can hold a deadline job there. Its effects time out hard after 200ms.
func holdingAsyncConnector(bankURL string, timeout time.Duration) effects.Connector {
	return effects.Connector{
		Name: "async.hold", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
		Timeout: timeout, AsyncTimeout: 200 * time.Millisecond, HardTimeout: true,
		Dispatch: func(_ context.Context, call effects.Call) (json.RawMessage, error) {
			return nil, effects.Accepted(call.CorrelationID)
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) { return effects.Absent(), nil },
		Cancel: func(ctx context.Context, call effects.Call) error {
			u := bankURL + "/checkpoint?name=before-cancel&key=" + url.QueryEscape(call.IdempotencyKey)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		},
	}
}

// A reactor is SIGKILLed while its deadline job cancels, upstream, an async effect whose hard
// timeout passed. A live reactor takes the deadline job over within seconds, cancels again, and
// fails the effect as the deadline says.
func TestTakeoverOfDeadline(t *testing.T) {
	t.Parallel()
	h := setup(t, noSweep)
	require.NoError(t, h.registry.Register(holdingAsyncConnector(h.bank.URL(), 5*time.Second)))
	key := fmt.Sprintf("deadline-%d", time.Now().UnixNano())
	reached := h.bank.ArmKey("before-cancel", key)
	holder := h.startHolder(time.Minute)
	effect, err := h.client.Enqueue(context.Background(), effects.Spec{Connector: "async.hold", IdempotencyKey: key, Args: map[string]any{}}, nil)
	require.NoError(t, err)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the holder never reached the upstream cancel\n%s", holder.Stderr())
	}
	require.Equal(t, effects.StatePending, h.state(effect.ID))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job j JOIN reckon_effects e ON e.job_id = j.id
		WHERE e.id = $1 AND j.kind = 'reckon_deadline' AND j.state = 'running'`, effect.ID))
	h.start()

	testkit.KillAndAwaitTakeover(t, h.pool, holder, h.jobOf(effect.ID), h.client.ID())
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateFailed, done.State)
	require.Equal(t, "hard timeout: cancelled upstream", done.Error)
	testkit.RequireNoRunningJobs(t, h.pool)
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_deadline"}))
}

// A reactor's host vanishes: its database connection stays open on the server (as it does until
// TCP keepalives notice, hours by default), so its lock stays held, but its heartbeat stops while
// River says it runs a dispatch job. Once the heartbeat is HeartbeatTimeout old, a live reactor ends
// that connection, which frees the lock, and takes the job over; the effect is resolved by status
// check (the silent attempt may have called the bank) and then sent once.
func TestTakeoverOfSilentReactor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, noSweep, func(c *effects.Config) { c.HeartbeatTimeout = 2 * time.Second })
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
	key := fmt.Sprintf("silent-%d", time.Now().UnixNano())
	effect := h.enqueueWithJob("bank.wire", key, 100) // no reactor runs yet: the job waits

	silent := "silent-" + uuid.NewString()
	conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, effects.ReactorLockNamespace, silent)
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `INSERT INTO reckon_reactors (id, queue, heartbeat_at) VALUES ($1, 'reckon', now() - interval '10 seconds')`, silent)
	require.NoError(t, err)
	jobID := h.jobOf(effect.ID)
	_, err = h.pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY[$2::text]
		WHERE id = $1`, jobID, silent)
	require.NoError(t, err)

	started := time.Now()
	h.start()
	require.Eventually(t, func() bool { return conn.Ping(ctx) != nil }, testkit.TakeoverBound, 20*time.Millisecond,
		"the silent reactor's connection was not ended")
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running' AND attempted_by[cardinality(attempted_by)] = $2`, jobID, silent) == 0
	}, testkit.TakeoverBound, 20*time.Millisecond)
	t.Logf("taken over %v after the live reactor started", time.Since(started).Round(time.Millisecond))
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 1, h.bank.Count(key))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_reactors WHERE id = $1 AND dead_at IS NOT NULL`, silent))
	testkit.RequireNoRunningJobs(t, h.pool)
}

// A live reactor loses its liveness connection and, before it gets its lock back, another reactor
// takes it for dead and takes its running job over. When it reconnects it finds itself marked
// dead: it cancels its work in flight and reports ErrPresumedDead on Fatal, and the effect it was
// about to send is sent exactly once, by the reactor that took it over.
func TestReactorTakenForDeadStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, noSweep, func(c *effects.Config) { c.TakeoverGrace = -1 })
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Checkpoints: true, Timeout: time.Minute})
	key := fmt.Sprintf("cut-off-%d", time.Now().UnixNano())
	reached := h.bank.ArmKey("before-call", key)

	// The reactor to be cut off beats only every 5s, so that the other one finds its lock free first.
	config := testkit.FastConfig(h.registry)
	config.InFlightMargin = time.Minute
	config.LivenessInterval = 5 * time.Second
	cutOff, err := effects.NewClient(h.pool, config)
	require.NoError(t, err)
	require.NoError(t, cutOff.Start(ctx))
	t.Cleanup(func() { _ = cutOff.Stop(context.Background()) })
	effect := h.enqueue("bank.wire", key, 100)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the reactor never reached the checkpoint")
	}
	jobID := h.jobOf(effect.ID)
	h.start()

	var ended int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid::bigint = ($1::integer::bigint & 4294967295)
		  AND objid::bigint = (hashtext($2)::bigint & 4294967295)`, effects.ReactorLockNamespace, cutOff.ID()).Scan(&ended))
	require.Equal(t, 1, ended, "the cut-off reactor's liveness connection")

	select {
	case err := <-cutOff.Fatal():
		require.ErrorIs(t, err, effects.ErrPresumedDead)
	case <-time.After(20 * time.Second):
		t.Fatal("the reactor taken for dead did not stop")
	}
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_reactors WHERE id = $1 AND dead_at IS NOT NULL AND taken_over_by = $2`,
		cutOff.ID(), h.client.ID()))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running' AND attempted_by[cardinality(attempted_by)] = $2`,
		jobID, cutOff.ID()))
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.Equal(t, 1, h.bank.Count(key), "sent exactly once")
	testkit.RequireNoRunningJobs(t, h.pool)
}

// A stopped client starts again at once, and works: Stop releases the reactor's liveness lock
// before it returns, rather than leaving it to the end of its connection's server process, which
// a Start right after would find still holding the id.
func TestRestartAtOnce(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	for i := range 30 {
		require.NoError(t, h.client.Start(ctx), "start %d", i)
		require.NoError(t, h.client.Stop(ctx), "stop %d", i)
	}
	h.start()
	require.Equal(t, "CONFIRMED", string(h.wait(h.enqueue("bank.wire", "after-restarts", 1).ID).State))
}

// A reactor restarted under a fixed id after its process died hands back the jobs its predecessor
// left running before its own River client starts (none of them can be its own), and runs them.
func TestRestartUnderSameIDTakesOverPredecessorsJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := "fixed-" + uuid.NewString()
	h := setup(t, noSweep, func(c *effects.Config) { c.ID = id })
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
	key := fmt.Sprintf("restart-%d", time.Now().UnixNano())
	effect := h.enqueueWithJob("bank.wire", key, 100)
	jobID := h.jobOf(effect.ID)
	// The predecessor died while it ran the job: registered, its lock free (its process is gone).
	_, err := h.pool.Exec(ctx, `INSERT INTO reckon_reactors (id, queue) VALUES ($1, 'reckon')`, id)
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY[$2::text]
		WHERE id = $1`, jobID, id)
	require.NoError(t, err)

	h.start()
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running' AND attempt = 1`, jobID),
		"handed back at Start")
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 1, h.bank.Count(key))
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_dispatch"}))
}

// The reactor that leads River's maintenance (its scheduler makes scheduled jobs — async deadlines,
// retries — available) is SIGKILLed with no job running. A live reactor ends its leadership as soon
// as it finds it dead, so a live one leads within seconds instead of when the dead one's lease
// runs out.
func TestDeadLeaderIsReplacedInSeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, noSweep)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
	leader := h.startHolder(time.Second)
	var leaderID string
	require.Eventually(t, func() bool {
		return h.pool.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&leaderID) == nil
	}, 30*time.Second, 20*time.Millisecond, "the first reactor was elected")
	h.start()
	require.NotEqual(t, h.client.ID(), leaderID)

	killed := time.Now()
	leader.Signal(t, syscall.SIGKILL)
	leader.Wait(t, 10*time.Second)
	require.Eventually(t, func() bool {
		var now string
		return h.pool.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&now) == nil && now == h.client.ID()
	}, testkit.TakeoverBound, 20*time.Millisecond, "the live reactor did not lead within %v of the leader's death", testkit.TakeoverBound)
	t.Logf("a live reactor leads %v after the leader's SIGKILL", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_reactors WHERE id = $1 AND dead_at IS NOT NULL`, leaderID))
}

// A River client that is not a registered reactor (a reactor of a version before registration)
// died with jobs running. Its lock cannot be tested, so a live reactor goes by each job's own
// deadline: the job whose run is past its call timeout plus InFlightMargin is handed back (and the
// wire, performed exactly once, recorded); the one still within it is left alone.
func TestTakeoverOfUnregisteredClientsJobs(t *testing.T) {
	t.Parallel()
	h := setup(t) // InFlightMargin 2 s
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Timeout: 5 * time.Second})
	stale := h.enqueueWithJob("bank.wire", "unregistered-stale", 100)
	recent := h.enqueueWithJob("bank.wire", "unregistered-recent", 200)
	ctx := context.Background()
	run := func(effect *effects.Effect, owner, startedAgo string) {
		tag, err := h.pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_by = ARRAY[$2::text],
			attempted_at = now() - $3::interval
			WHERE id = (SELECT job_id FROM reckon_effects WHERE id = $1)`, effect.ID, owner, startedAgo)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	}
	run(stale, "old-reactor", "8 seconds") // 5 s call timeout + 2 s margin: past
	run(recent, "old-reactor", "1 second") // within
	jobOf := func(effect *effects.Effect) (state string, from string, errs string) {
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT j.state::text, coalesce(j.metadata->>'reckon:taken_over_from', ''), coalesce(j.errors::text, '')
			FROM river_job j WHERE j.kind = 'reckon_dispatch' AND j.args->>'effect_id' = $1::text ORDER BY j.id LIMIT 1`, effect.ID).Scan(&state, &from, &errs))
		return state, from, errs
	}

	h.start()
	require.Eventually(t, func() bool { state, _, _ := jobOf(stale); return state != "running" }, 10*time.Second, 20*time.Millisecond,
		"the unregistered client's stale job is handed back")
	_, from, errs := jobOf(stale)
	require.Equal(t, "old-reactor", from)
	require.Contains(t, errs, "River client old-reactor is not a registered reactor")
	state, from, _ := jobOf(recent)
	require.Equal(t, "running", state, "its run may still be live")
	require.Empty(t, from)
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_dispatch"}))

	// The sweeper or the job's next run resolves the effect; the wire is performed once.
	require.Equal(t, effects.StateConfirmed, h.wait(stale.ID).State)
	require.Equal(t, 1, h.bank.Count("unregistered-stale"))
	require.Eventually(t, func() bool { state, _, _ := jobOf(stale); return state == "completed" }, 10*time.Second, 20*time.Millisecond)
}

// TestTwoReactorsRace runs two reactors over the same 1,000 effects: no effect is ever in flight
// on two workers at once, and the bank performs each exactly once.
func TestTwoReactorsRace(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const n = 1000

	var (
		inFlight  sync.Map // effect id → struct{}
		overlaps  atomic.Int64
		byReactor [2]atomic.Int64
		clients   [2]*effects.Client
		bankWire  = fakebank.ConnectorOptions{BaseURL: h.bank.URL(), StatusCheck: true, Backoff: testkit.FastBackoff}.Connector()
		ctx       = context.Background()
	)
	for i := range clients {
		registry := effects.NewRegistry()
		connector := bankWire
		connector.Dispatch = func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			if _, busy := inFlight.LoadOrStore(call.EffectID, struct{}{}); busy {
				overlaps.Add(1)
			}
			defer inFlight.Delete(call.EffectID)
			byReactor[i].Add(1)
			return bankWire.Dispatch(ctx, call)
		}
		require.NoError(t, registry.Register(connector))
		config := testkit.FastConfig(registry)
		config.ID = fmt.Sprintf("racer-%d", i)
		client, err := effects.NewClient(h.pool, config)
		require.NoError(t, err)
		clients[i] = client
	}

	specs := make([]effects.Spec, n)
	for i := range specs {
		specs[i] = effects.Spec{Connector: "bank.wire", IdempotencyKey: fmt.Sprintf("race-%04d", i), Args: map[string]any{"account": "a", "amount": i + 1}}
	}
	var enqueued []*effects.Effect
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		var err error
		enqueued, err = clients[0].EnqueueManyTx(ctx, tx, specs, nil)
		return err
	}))
	for _, client := range clients {
		require.NoError(t, client.Start(ctx))
	}
	defer func() {
		for _, client := range clients {
			require.NoError(t, client.Stop(context.Background()))
		}
	}()

	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'CONFIRMED'`) == n
	}, 60*time.Second, 50*time.Millisecond, "all effects confirmed")
	require.Zero(t, overlaps.Load(), "an effect was in flight on two workers at once")
	for i, e := range enqueued {
		require.Equal(t, 1, h.bank.Count(e.IdempotencyKey), "effect %d performed once", i)
	}
	require.Len(t, h.bank.Ledger(), n)
	require.Equal(t, int64(n), byReactor[0].Load()+byReactor[1].Load(), "one call per effect")
	require.Positive(t, byReactor[0].Load(), "reactor 0 took part")
	require.Positive(t, byReactor[1].Load(), "reactor 1 took part")
}

// TestRescuedJobIsNotCalledBlindly: River runs a dispatch job again after a run that claimed the
// attempt and died (simulated here by rewinding the job as River's rescuer does). A non-idempotent
// effect is reconciled instead of called; an idempotent one is called again with the same key.
func TestRescuedJobIsNotCalledBlindly(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.wire(fakebank.ConnectorOptions{Name: "bank.upsert", Tags: idempotentTags})
	h.bank.SetIdempotent(true)
	ctx := context.Background()
	later := &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)}

	wire, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "rescued-1", Args: map[string]any{"account": "a", "amount": 1}}, later)
	require.NoError(t, err)
	upsert, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.upsert", IdempotencyKey: "rescued-2", Args: map[string]any{"account": "a", "amount": 1}}, later)
	require.NoError(t, err)
	// As River leaves a job whose worker died and was rescued: attempt 1 spent, available again.
	_, err = h.pool.Exec(ctx, `UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'available', scheduled_at = now()
		WHERE kind = 'reckon_dispatch'`)
	require.NoError(t, err)
	h.start()

	require.Equal(t, effects.StateConfirmed, h.wait(wire.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(wire.ID))
	require.Equal(t, 1, h.bank.Count("rescued-1"))

	require.Equal(t, effects.StateConfirmed, h.wait(upsert.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(upsert.ID))
}

// TestLateOutcomeIsFencedOut: a call that outlives its timeout and margin is presumed dead; the
// sweeper makes the effect UNKNOWN and reconciliation confirms it. When the late call returns, its
// outcome is refused by the fence and kept in the audit trail only.
func TestLateOutcomeIsFencedOut(t *testing.T) {
	t.Parallel()
	h := setup(t)
	release := make(chan struct{})
	var calls atomic.Int64
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "stubborn", Tags: wireTags, Timeout: 500 * time.Millisecond, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			calls.Add(1)
			<-release // ignores its context, as badly written clients do
			return json.RawMessage(`{"late":true}`), nil
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{"seen":"by status check"}`)), nil
		},
	}))
	h.start()
	effect := h.enqueue("stubborn", "late-1", 1)
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.JSONEq(t, `{"seen":"by status check"}`, string(done.Result))
	close(release)

	require.Eventually(t, func() bool {
		return h.metric("reckon_effect_fenced_writes_total", map[string]string{"connector": "stubborn"}) == 1
	}, 10*time.Second, 20*time.Millisecond)
	history, err := h.client.History(context.Background(), effect.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, effects.StateConfirmed, last.From)
	require.Equal(t, effects.StateConfirmed, last.To)
	require.Equal(t, "fenced out: confirmed", last.Reason)
	require.JSONEq(t, `{"seen":"by status check"}`, string(h.mustGet(effect.ID).Result), "the late outcome changed nothing")
	require.Equal(t, int64(1), calls.Load())
}

func (h *harness) mustGet(id uuid.UUID) *effects.Effect {
	h.t.Helper()
	effect, err := h.client.Get(context.Background(), id)
	require.NoError(h.t, err)
	return effect
}

// TestSweeperTakesOverLostWork: an effect whose dispatch job vanished, and an inline attempt whose
// caller hangs past its lease, are both made UNKNOWN by the sweeper and resolved by
// reconciliation — never by a blind second call.
func TestSweeperTakesOverLostWork(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	release := make(chan struct{})
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "hanging", Tags: wireTags, Timeout: 300 * time.Millisecond, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			<-release
			return json.RawMessage(`{}`), nil
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{"found":true}`)), nil
		},
	}))
	ctx := context.Background()

	lost, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "lost-1", Args: map[string]any{"account": "a", "amount": 1}},
		&effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `DELETE FROM river_job`)
	require.NoError(t, err)

	inline := make(chan *effects.Effect, 1)
	go func() {
		effect, _ := h.client.Do(ctx, effects.Spec{Connector: "hanging", IdempotencyKey: "inline-hang", Args: map[string]any{}})
		inline <- effect
	}()
	h.start()

	require.Equal(t, effects.StateConfirmed, h.wait(lost.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(lost.ID))
	require.Equal(t, 1, h.bank.Count("lost-1"))

	var hungID uuid.UUID
	require.Eventually(t, func() bool {
		return h.pool.QueryRow(ctx, `SELECT id FROM reckon_effects WHERE idempotency_key = 'inline-hang'`).Scan(&hungID) == nil
	}, 5*time.Second, 10*time.Millisecond)
	hung := h.wait(hungID)
	require.Equal(t, effects.StateConfirmed, hung.State)
	require.JSONEq(t, `{"found":true}`, string(hung.Result))
	history, err := h.client.History(ctx, hungID)
	require.NoError(t, err)
	require.Equal(t, "inline attempt's lease expired: outcome unknown; reconcile instead of calling again", history[1].Reason)
	close(release)
	require.Equal(t, effects.StateConfirmed, (<-inline).State, "Do reports the state it finds once fenced out")
	require.Positive(t, h.metric("reckon_effect_swept_total", map[string]string{"reason": "inline attempt's lease expired"}))
}

// TestFencedOutWriteLeavesNoJob: an attempt presumed dead whose late outcome is ambiguous would
// hand the effect to a reconcile job; fenced out, its transaction is rolled back, so the only
// reconcile job is the sweeper's.
func TestFencedOutWriteLeavesNoJob(t *testing.T) {
	t.Parallel()
	h := setup(t)
	release := make(chan struct{})
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "late-and-unsure", Tags: wireTags, Timeout: 300 * time.Millisecond, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			<-release
			return nil, errors.New("connection reset")
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{}`)), nil
		},
	}))
	h.start()
	effect := h.enqueue("late-and-unsure", "unsure-1", 1)
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	close(release)
	require.Eventually(t, func() bool {
		return h.metric("reckon_effect_fenced_writes_total", map[string]string{"connector": "late-and-unsure"}) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_reconcile'`), "no orphan reconcile job")
}
