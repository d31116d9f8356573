package turns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/recovery"
	"github.com/reckonhq/reckon/internal/txn"
)

// Result is what running a turn did.
type Result struct {
	// Turn is the turn as it ended: COMPLETE, or SUPERSEDED by a decision.
	Turn *Record
	// Effects are the effects its commit enqueued, in staging order (Deduplicated when the turn
	// group already had the journal position).
	Effects []*effects.Effect
}

// notDueError says the accumulating turn's aggregation window is still open.
type notDueError struct{ due time.Time }

func (e *notDueError) Error() string { return "turns: aggregation window open until " + e.due.String() }

// RunTurn processes the session's accumulating turn now, without waiting for its aggregation
// window: it acquires the session mutex (ErrSessionBusy after Config.AcquireTimeout), takes over
// turns whose holder died or failed (a new attempt of their messages in the same turn group),
// runs the handler and commits. ErrNoTurn when there is nothing to process; ErrNotReady (nothing
// changed) when the handler is a Readier that is not ready for the session; ErrTurnFailed, with
// the FAILED turn in the Result, when the handler returned an effects.Permanent error. On another handler or
// commit error nothing the turn staged is committed and the turn stays PROCESSING, to be taken
// over by the next run of the session.
func (c *Client) RunTurn(ctx context.Context, sessionKey string) (*Result, error) {
	if _, err := ParseSessionKey(sessionKey); err != nil {
		return nil, err
	}
	return c.process(ctx, sessionKey, false, c.config.AcquireTimeout)
}

func (c *Client) process(ctx context.Context, sessionKey string, respectWindow bool, acquireTimeout time.Duration) (*Result, error) {
	ec, err := c.effectsClient()
	if err != nil {
		return nil, err
	}
	if c.config.Handler == nil {
		return nil, fmt.Errorf("%w: this process has no turn handler (turns.Config.Handler)", ErrNotReady)
	}
	if readier, ok := c.config.Handler.(Readier); ok {
		if err := readier.Ready(ctx, sessionKey); err != nil {
			if !errors.Is(err, ErrNotReady) {
				err = fmt.Errorf("%w: %w", ErrNotReady, err)
			}
			return nil, err
		}
	}
	started := time.Now()
	lock, err := c.mutex.Acquire(ctx, sessionKey, acquireTimeout)
	if err != nil {
		if errors.Is(err, ErrSessionBusy) {
			c.metrics.wait.WithLabelValues("busy").Observe(time.Since(started).Seconds())
		}
		return nil, err
	}
	c.metrics.wait.WithLabelValues("acquired").Observe(time.Since(started).Seconds())
	defer func() {
		if err := lock.Release(ctx); err != nil {
			c.logger.WarnContext(ctx, "release session mutex", slog.String("session_key", sessionKey), slog.String("error", err.Error()))
		}
	}()

	row, err := c.open(ctx, lock, respectWindow)
	if err != nil {
		return nil, err
	}
	messages, err := dbsqlc.New(lock.Conn()).MessageListByTurn(ctx, &row.ID)
	if err != nil {
		return nil, fmt.Errorf("turns: read messages of turn %s: %w", row.ID, err)
	}
	session, _ := ParseSessionKey(sessionKey)
	turn := &Turn{
		ID: row.ID, Seq: row.Seq, SessionKey: sessionKey, Group: row.TurnGroup, Channel: row.Channel, Tenant: session.Tenant,
		Attempt: int(row.Attempt), client: c, lock: lock, ec: ec, messages: messagesFromRows(messages), decided: map[uuid.UUID]bool{},
	}
	log := c.logger.With(slog.String("turn_id", row.ID.String()), slog.String("session_key", sessionKey))
	log.DebugContext(ctx, "turn started", slog.Int("messages", len(messages)), slog.Int("attempt", int(row.Attempt)))

	handlerErr := c.callHandler(ctx, log, turn)
	staged, superseded := turn.end()
	if superseded {
		ended, err := c.Get(ctx, row.ID)
		if err != nil {
			return nil, err
		}
		return &Result{Turn: ended}, nil
	}
	if handlerErr != nil && effects.IsPermanent(handlerErr) {
		return c.fail(ctx, lock, row.ID, handlerErr)
	}
	if handlerErr != nil {
		c.metrics.failures.Inc()
		log.WarnContext(ctx, "turn handler failed; nothing committed", slog.String("error", handlerErr.Error()))
		return nil, fmt.Errorf("turns: turn %s: handler: %w", row.ID, handlerErr)
	}
	result, err := c.commit(ctx, lock, ec, row.ID, staged)
	if err != nil {
		c.metrics.failures.Inc()
		log.WarnContext(ctx, "turn commit failed; nothing committed", slog.String("error", err.Error()))
		return nil, err
	}
	c.metrics.ended.WithLabelValues(string(StatusComplete)).Inc()
	return result, nil
}

// open takes over abandoned turns and starts the session's accumulating turn, under the mutex.
func (c *Client) open(ctx context.Context, lock *Lock, respectWindow bool) (dbsqlc.ReckonTurn, error) {
	sessionKey := lock.SessionKey()
	var started dbsqlc.ReckonTurn
	var notDue *notDueError
	nothing := false
	err := txn.Once(ctx, lock.Conn(), func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := scheduleLock(sessionKey).LockTx(ctx, tx); err != nil {
			return err
		}
		acc, err := q.TurnGetAccumulating(ctx, sessionKey)
		hasAcc := err == nil
		if err != nil && !postgres.NoRows(err) {
			return fmt.Errorf("read accumulating turn: %w", err)
		}
		orphans, err := q.TurnListInFlight(ctx, sessionKey)
		if err != nil {
			return fmt.Errorf("read in-flight turns: %w", err)
		}
		retry := false
		for _, orphan := range orphans {
			// We hold the mutex, so whoever ran this turn is gone or gave up on it.
			if int(orphan.Attempt) >= c.config.MaxAttempts {
				if err := q.TurnEnd(ctx, dbsqlc.TurnEndParams{
					ID: orphan.ID, Status: dbsqlc.ReckonTurnStatusFAILED,
					StatusReason: ptrTo(fmt.Sprintf("abandoned after %d attempts", orphan.Attempt)),
				}); err != nil {
					return fmt.Errorf("fail turn %s: %w", orphan.ID, err)
				}
				c.metrics.ended.WithLabelValues(string(StatusFailed)).Inc()
				c.logger.ErrorContext(ctx, "turn failed on every attempt", slog.String("turn_id", orphan.ID.String()),
					slog.String("session_key", sessionKey), slog.Int("attempts", int(orphan.Attempt)))
				continue
			}
			if !hasAcc {
				acc, err = q.TurnInsert(ctx, dbsqlc.TurnInsertParams{
					ID: uuid.Must(uuid.NewV7()), SessionKey: sessionKey, TurnGroup: orphan.TurnGroup, Channel: orphan.Channel,
					MessageIds: []uuid.UUID{}, FirstAt: orphan.FirstAt, LastAt: orphan.LastAt, WindowMs: 0,
					Attempt: orphan.Attempt + 1, AggregationReason: ptrTo("retry"),
				})
				if err != nil {
					return fmt.Errorf("open retry turn: %w", err)
				}
				hasAcc = true
			}
			if err := c.moveTurnTx(ctx, tx, orphan, acc, fmt.Sprintf("abandoned: attempt %d did not complete", orphan.Attempt)); err != nil {
				return err
			}
			if err := q.TurnInherit(ctx, dbsqlc.TurnInheritParams{ID: acc.ID, TurnGroup: orphan.TurnGroup, Attempt: orphan.Attempt + 1}); err != nil {
				return err
			}
			c.metrics.ended.WithLabelValues(string(StatusSuperseded)).Inc()
			retry = true
		}
		if !hasAcc {
			nothing = true
			return nil // commit what was ended
		}
		if respectWindow && !retry {
			due, err := q.TurnDueAt(ctx, acc.ID)
			if err != nil {
				return err
			}
			if due.DueAt.After(due.Now) {
				notDue = &notDueError{due: time.Now().Add(due.DueAt.Sub(due.Now))}
				return nil // commit what was taken over
			}
		}
		reason := "run_now"
		if respectWindow {
			reason = c.policy(acc.Channel).reason()
		}
		current, err := q.TurnGet(ctx, acc.ID)
		if err != nil {
			return err
		}
		started, err = q.TurnStart(ctx, dbsqlc.TurnStartParams{
			ID: acc.ID, Holder: &c.config.ID, BeatKey: ptrTo(beatKey(current.MessageIds)), AggregationReason: &reason,
		})
		if err != nil {
			return fmt.Errorf("start turn %s: %w", acc.ID, err)
		}
		return nil
	})
	if err != nil {
		return started, fmt.Errorf("turns: open turn of %q: %w", sessionKey, err)
	}
	if nothing {
		return started, ErrNoTurn
	}
	if notDue != nil {
		return started, notDue
	}
	return started, nil
}

// moveTurnTx ends an in-flight turn as SUPERSEDED by to, moving its messages there.
func (c *Client) moveTurnTx(ctx context.Context, tx pgx.Tx, from, to dbsqlc.ReckonTurn, reason string) error {
	q := dbsqlc.New(tx)
	if err := q.TurnEnd(ctx, dbsqlc.TurnEndParams{
		ID: from.ID, Status: dbsqlc.ReckonTurnStatusSUPERSEDED, StatusReason: &reason, SupersededBy: &to.ID,
	}); err != nil {
		return fmt.Errorf("supersede turn %s: %w", from.ID, err)
	}
	if err := q.MessageMove(ctx, dbsqlc.MessageMoveParams{FromTurnID: &from.ID, ToTurnID: &to.ID}); err != nil {
		return fmt.Errorf("move messages of turn %s: %w", from.ID, err)
	}
	current, err := q.TurnGet(ctx, to.ID)
	if err != nil {
		return err
	}
	if _, err := q.TurnAddMessages(ctx, dbsqlc.TurnAddMessagesParams{
		ID: to.ID, MessageIds: from.MessageIds, FirstAt: from.FirstAt, LastAt: current.LastAt, WindowMs: current.WindowMs,
	}); err != nil {
		return fmt.Errorf("add messages to turn %s: %w", to.ID, err)
	}
	return nil
}

// supersedeTx ends the running turn id as SUPERSEDED: its messages move to the session's
// accumulating turn, which inherits its turn group.
func (c *Client) supersedeTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, sessionKey, reason string) error {
	q := dbsqlc.New(tx)
	if err := scheduleLock(sessionKey).LockTx(ctx, tx); err != nil {
		return err
	}
	from, err := q.TurnGet(ctx, id)
	if err != nil {
		return err
	}
	acc, err := q.TurnGetAccumulating(ctx, sessionKey)
	if err != nil {
		return fmt.Errorf("read accumulating turn: %w", err)
	}
	if err := c.moveTurnTx(ctx, tx, from, acc, reason); err != nil {
		return err
	}
	return q.TurnInherit(ctx, dbsqlc.TurnInheritParams{ID: acc.ID, TurnGroup: from.TurnGroup, Attempt: 1})
}

// fail ends a turn whose handler returned an effects.Permanent error: FAILED with the error as its reason,
// nothing staged committed. The run returns ErrTurnFailed.
func (c *Client) fail(ctx context.Context, lock *Lock, id uuid.UUID, handlerErr error) (*Result, error) {
	reason := jsonx.SafeText("handler failed permanently: " + handlerErr.Error()) // it may quote the handler
	if len(reason) > 2000 {
		reason = reason[:2000]
	}
	if err := dbsqlc.New(lock.Conn()).TurnEnd(ctx, dbsqlc.TurnEndParams{
		ID: id, Status: dbsqlc.ReckonTurnStatusFAILED, StatusReason: &reason,
	}); err != nil {
		// Left PROCESSING: the next run takes it over as an attempt.
		c.metrics.failures.Inc()
		return nil, fmt.Errorf("turns: turn %s: record permanent failure: %w", id, err)
	}
	c.metrics.ended.WithLabelValues(string(StatusFailed)).Inc()
	c.logger.ErrorContext(ctx, "turn failed permanently; nothing committed", slog.String("turn_id", id.String()),
		slog.String("session_key", lock.SessionKey()), slog.String("error", handlerErr.Error()))
	ended, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &Result{Turn: ended}, fmt.Errorf("%w: turn %s: %w", ErrTurnFailed, id, handlerErr)
}

// callHandler runs the handler. A panic in it is an error that is not permanent (the turn is
// tried again); its stack goes to the log.
func (c *Client) callHandler(ctx context.Context, log *slog.Logger, turn *Turn) error {
	err := recovery.Do("handler", func() error { return c.config.Handler.HandleTurn(ctx, turn) })
	if p, ok := errors.AsType[*recovery.Panic](err); ok {
		log.ErrorContext(ctx, "turn handler panicked", slog.Any("panic", p.Value), slog.String("stack", string(p.Stack)))
	}
	return err
}

// commit is the turn's commit point: on the mutex's connection, one transaction runs the staged
// mutations and enqueues the staged effects in staging order, and moves the turn to COMPLETE. If
// any of it fails, the transaction rolls back and the turn is left PROCESSING as it was.
func (c *Client) commit(ctx context.Context, lock *Lock, ec *effects.Client, id uuid.UUID, staged []stagedOp) (*Result, error) {
	conn := lock.Conn()
	if _, err := dbsqlc.New(conn).TurnSetStatus(ctx, dbsqlc.TurnSetStatusParams{
		ID: id, Status: dbsqlc.ReckonTurnStatusCOMMITTING, FromStatus: dbsqlc.ReckonTurnStatusPROCESSING,
	}); err != nil {
		return nil, fmt.Errorf("turns: turn %s: mark committing: %w", id, err)
	}
	result := &Result{}
	err := txn.Once(ctx, conn, func(tx pgx.Tx) error {
		opts := &effects.EnqueueOpts{Actor: "turn:" + c.config.ID, Reason: "turn " + id.String() + " committed"}
		for i, op := range staged {
			if op.mutate != nil {
				if err := op.mutate(ctx, tx); err != nil {
					return fmt.Errorf("staged mutation %d: %w", i, err)
				}
				continue
			}
			effect, err := ec.EnqueueTx(ctx, tx, *op.effect, opts)
			if err != nil {
				return fmt.Errorf("staged effect %d (%s): %w", i, op.effect.Connector, err)
			}
			result.Effects = append(result.Effects, effect)
		}
		row, err := dbsqlc.New(tx).TurnComplete(ctx, id)
		if err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		result.Turn = recordFromRow(row)
		return nil
	})
	if err != nil {
		restoreCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, restoreErr := dbsqlc.New(conn).TurnSetStatus(restoreCtx, dbsqlc.TurnSetStatusParams{
			ID: id, Status: dbsqlc.ReckonTurnStatusPROCESSING, FromStatus: dbsqlc.ReckonTurnStatusCOMMITTING,
		}); restoreErr != nil {
			c.logger.WarnContext(ctx, "restore turn to PROCESSING after a failed commit", slog.String("turn_id", id.String()), slog.String("error", restoreErr.Error()))
		}
		return nil, fmt.Errorf("turns: commit turn %s: %w", id, err)
	}
	return result, nil
}
