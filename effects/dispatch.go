package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/recovery"
)

type riverDriver = riverpgxv5.Driver

// recordTimeout bounds the transaction that writes an outcome. It runs on a context detached from
// the worker's, so that an outcome is written even while the reactor is shutting down.
const recordTimeout = 30 * time.Second

// unknownConnectorSnooze is how long a job waits when this reactor has no connector for it.
const unknownConnectorSnooze = 30 * time.Second

// dispatchWorker runs the dispatch protocol (docs/design.md). River's fetch is the durable attempt claim: the job is
// `running` with attempt n, committed, before Work runs. The outcome is written fenced by the job
// (the effect must still be PENDING and still belong to this job) together with the job's
// completion, in one transaction; a batch job, carrying several effects, completes after the
// last. A run with attempt > 1 means an earlier run of this job was interrupted after its claim —
// perhaps after calling the upstream — so a non-idempotent effect becomes UNKNOWN instead of being
// called again.
type dispatchWorker struct{ effectWorker[dispatchArgs] }

func (w *dispatchWorker) Work(ctx context.Context, job *river.Job[dispatchArgs]) error {
	if !job.Args.shared() {
		return w.client.dispatch(ctx, job, *job.Args.EffectID)
	}
	// A batch job: its effects are called concurrently, each under its own timeout and written
	// through group commit as soon as it answers. The job completes once every effect is settled
	// or handed on; an error makes River run it again, which the effects still PENDING with this
	// job see as attempt > 1, exactly as a job of their own would.
	ids := job.Args.EffectIDs
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As River does for Work: a panic fails the job (attempt > 1 next time). The effect's id
			// is put in the message only then, off the path of every other dispatch.
			err := recovery.Do("dispatch", func() error { return w.client.dispatch(ctx, job, id) })
			if p, ok := errors.AsType[*recovery.Panic](err); ok {
				err = fmt.Errorf("effects: effect %s: %w", id, p)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return batchResult(errs)
}

// batchResult is what a batch job returns for the results of its effects. Any failure beyond a
// snooze wins, so that the next run counts as a new attempt: a snooze keeps the attempt, which is
// right only when no effect of the job may have been called and left unrecorded.
func batchResult(errs []error) error {
	var (
		failures []error
		snooze   *rivertype.JobSnoozeError
	)
	for _, err := range errs {
		var s *rivertype.JobSnoozeError
		switch {
		case err == nil:
		case errors.As(err, &s):
			if snooze == nil || s.Duration < snooze.Duration {
				snooze = s
			}
		default:
			failures = append(failures, err)
		}
	}
	if len(failures) > 0 {
		return errors.Join(failures...)
	}
	if snooze != nil {
		return snooze
	}
	return nil
}

// dispatch runs one effect of job.
func (c *Client) dispatch(ctx context.Context, job *river.Job[dispatchArgs], effectID uuid.UUID) error {
	row, err := c.loader.load(ctx, effectID)
	if errors.Is(err, ErrNotFound) {
		if !job.Args.shared() { // a batch job also names the effects that were deduplicated away
			c.logger.WarnContext(ctx, "dispatch job without effect", slog.String("effect_id", effectID.String()))
		}
		return nil
	}
	if err != nil {
		// Nothing was called: wait and read again without spending an attempt.
		c.logger.WarnContext(ctx, "dispatch: read effect", slog.String("error", err.Error()))
		return river.JobSnooze(time.Second)
	}
	if State(row.State) != StatePending || row.JobID == nil || *row.JobID != job.ID {
		return nil // settled, or handed to another job since this one was enqueued
	}
	// The effect's span, in the trace its enqueue stored (linked to a batch job's span when that
	// is another trace).
	return workInEffectSpan(ctx, c, spanDispatch, job, row, c.dispatchRow)
}

// dispatchRow runs the dispatch protocol for row, an effect of job, PENDING and still the job's;
// span is the dispatch's.
func (c *Client) dispatchRow(ctx context.Context, span trace.Span, job *river.Job[dispatchArgs], row dbsqlc.ReckonEffect) error {
	connector, ok := c.registry.Get(row.Connector)
	if !ok {
		c.logger.ErrorContext(ctx, "dispatch: no connector registered in this reactor; waiting",
			slog.String("connector", row.Connector), slog.String("effect_id", row.ID.String()))
		setOutcome(span, "waiting: connector not registered", false, nil)
		return c.waitAWhile(ctx, job, row, unknownConnectorSnooze)
	}
	if c.ownerUnhooked(ctx, row.Owner, row.ID, "dispatch") {
		setOutcome(span, "waiting: owner has no settle hook", false, nil)
		return c.waitAWhile(ctx, job, row, unknownConnectorSnooze) // nothing called: wait for a reactor that has the hook
	}
	actor := "reactor:" + c.config.ID
	f := fence{jobID: &job.ID, sharedJob: job.Args.shared()}

	if job.Attempt > 1 && !Policy(row.Policy).RetrySafe() {
		// An earlier run that was only waiting for the limits called nothing (limit.go).
		waiting, err := c.heldBackUncalled(ctx, row.ID)
		if err != nil {
			c.logger.WarnContext(ctx, "dispatch: read the limits' queue", slog.String("effect_id", row.ID.String()), slog.String("error", err.Error()))
			return c.waitAWhile(ctx, job, row, time.Second) // nothing called: read again
		}
		if !waiting {
			setOutcome(span, "interrupted", true, errors.New("an earlier attempt was interrupted: outcome unknown, reconcile instead of calling again"))
			return c.recordInterrupted(ctx, job, row, f, actor)
		}
	}
	if job.Attempt == 1 && row.Attempts > 0 && row.RunID != nil && row.CompensatesID == nil {
		if stopped, err := c.stopCancelledRetry(ctx, job, row, f, actor); stopped || err != nil { // run.go
			return err
		}
	}

	// The connector's limits (limit.go): a call held back waits — in this worker while it may,
	// else with its job snoozed — nothing called, no attempt spent. An effect of a batch job that
	// must wait longer is handed to a job of its own, available now, which asks again and waits
	// (its place in the queue is kept).
	started := time.Now()
	if job.AttemptedAt != nil {
		started = *job.AttemptedAt
	}
	g, err := c.awaitCall(ctx, limitedOf(row), connector, started, job.Args.shared())
	if err != nil {
		c.logger.WarnContext(ctx, "dispatch: ask the limits", slog.String("effect_id", row.ID.String()), slog.String("error", err.Error()))
		setOutcome(span, "waiting: limits unreadable", false, nil)
		return c.waitAWhile(ctx, job, row, time.Second)
	}
	if g.wait > 0 {
		setOutcome(span, "waiting: limit "+g.reason, false, nil)
		if job.Args.shared() {
			return c.waitAWhile(ctx, job, row, 0)
		}
		return river.JobSnooze(c.limitSnooze(g.wait))
	}

	out := c.callDispatch(ctx, row, connector)
	setOutcome(span, string(out.kind), out.kind.failed(), out.err)

	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	c.releaseCall(recordCtx, limitedOf(row), connector, g, &out)
	if (out.kind == outcomeConfirmed || out.kind == outcomeFailed) && row.Owner == nil {
		// The common case goes through group commit. Owned effects do not: their owner's hook
		// runs in the settling transaction, which recordAttempt below writes on its own.
		w := &outcomeWrite{effectID: row.ID, jobID: job.ID, completeJob: !f.sharedJob, to: StateConfirmed, result: out.result, actor: actor,
			reason: "dispatch succeeded", detail: attemptDetail(int(row.Attempts)+1, job.ID)}
		if out.kind == outcomeFailed {
			w.to, w.result, w.errMsg, w.reason = StateFailed, nil, out.err.Error(), "permanent failure"
		}
		return c.afterRecord(recordCtx, row, job, actor, out, c.committer.write(recordCtx, w))
	}
	var (
		settled dbsqlc.ReckonEffect
		retryIn time.Duration
	)
	err = c.withTx(recordCtx, func(tx pgx.Tx) error {
		var err error
		settled, retryIn, err = c.recordAttempt(recordCtx, tx, attempt{row: row, connector: connector, fence: f, actor: actor}, out)
		if err != nil || retryIn > 0 {
			return err
		}
		return completeDispatchTx(recordCtx, tx, job)
	})
	if err != nil {
		return c.afterRecord(recordCtx, row, job, actor, out, err)
	}
	if retryIn > 0 && !f.sharedJob { // a batch job has handed the effect to a job of its own
		c.logger.InfoContext(ctx, "dispatch: retryable failure", slog.String("effect_id", row.ID.String()),
			slog.Duration("retry_in", retryIn), slog.String("error", errString(out.err)))
		return river.JobSnooze(retryIn)
	}
	if State(settled.State) != StatePending { // accepted: awaiting its callback
		c.countSettlement(row.Connector, row.Policy, StatePending, State(settled.State), settled.CreatedAt, settled.UpdatedAt)
	}
	return nil
}

// waitAWhile makes an effect that this reactor cannot dispatch yet wait for d, without calling
// anything: a job of its own snoozes (River does not count a snooze as an attempt); an effect of a
// batch job is handed to a job of its own, scheduled d later (d 0: available now).
func (c *Client) waitAWhile(ctx context.Context, job *river.Job[dispatchArgs], row dbsqlc.ReckonEffect, d time.Duration) error {
	if !job.Args.shared() {
		return river.JobSnooze(d)
	}
	// Like an outcome, the hand-off is written even when the job's time is up (a busy database
	// can keep a batch's effects asking their limits for long): failing it would make River run
	// the job again, and its effects would take that run for an interrupted attempt.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	due := time.Time{} // available now: River inserts a job with any ScheduledAt as scheduled, for its scheduler
	if d > 0 {
		due = time.Now().Add(d)
	}
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		newJob, err := c.insertDispatchJob(ctx, tx, row.ID, row.TimeoutMs, due)
		if err != nil {
			return err
		}
		_, err = dbsqlc.New(tx).EffectSetJob(ctx, dbsqlc.EffectSetJobParams{
			ID: row.ID, State: dbsqlc.ReckonEffectStatePENDING, JobID: &job.ID, NewJobID: *newJob,
		})
		if postgres.NoRows(err) {
			return errFencedOut // someone else decided first; the new job is rolled back
		}
		return err
	})
	if errors.Is(err, errFencedOut) {
		return nil
	}
	return err
}

// afterRecord ends a Work whose outcome write failed with err: a fenced-out outcome is kept in the
// audit trail and the job is done; any other error makes River run the job again, and that run
// sees attempt > 1.
func (c *Client) afterRecord(ctx context.Context, row dbsqlc.ReckonEffect, job *river.Job[dispatchArgs], actor string, out outcome, err error) error {
	if !errors.Is(err, errFencedOut) {
		return err
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrFencedOut.Bool(true))
	}
	c.observeFencedOut(ctx, row.ID, row.Connector, actor, string(out.kind),
		map[string]any{"job_id": job.ID, "attempt": job.Attempt, "error": errString(out.err)})
	return nil
}

// recordInterrupted makes the effect UNKNOWN because an earlier run of its job claimed an attempt
// and recorded nothing: it may have called the upstream.
func (c *Client) recordInterrupted(ctx context.Context, job *river.Job[dispatchArgs], row dbsqlc.ReckonEffect, f fence, actor string) error {
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		reconcileJob, err := c.insertReconcileJob(ctx, tx, row.ID, row.TimeoutMs, row.Connector)
		if err != nil {
			return err
		}
		_, err = c.settle(ctx, tx, row.ID, transition{
			from: StatePending, to: StateUnknown, fence: f, attempted: job.Attempt - 1,
			errMsg:   fmt.Sprintf("dispatch attempt %d was interrupted before its outcome was recorded", job.Attempt-1),
			newJobID: reconcileJob, actor: actor,
			reason: "earlier attempt interrupted: outcome unknown; reconcile instead of calling again",
			detail: map[string]any{"job_id": job.ID, "job_attempt": job.Attempt},
		})
		if err != nil {
			return err // fenced out: the reconcile job is rolled back with it
		}
		return completeDispatchTx(ctx, tx, job)
	})
	if errors.Is(err, errFencedOut) {
		return nil // settled or handed on by someone else
	}
	if err != nil {
		return err
	}
	c.countTransition(row.Connector, row.Policy, StatePending, StateUnknown)
	return nil
}

// callDispatch calls the connector — Dispatch, or Compensate for a compensation — classifies
// the answer, and observes how long the call took.
func (c *Client) callDispatch(ctx context.Context, row dbsqlc.ReckonEffect, connector *Connector) outcome {
	var out outcome
	var elapsed time.Duration
	if call, err := c.signedCallOf(ctx, row); err != nil {
		out = classify(nil, Retryable(err)) // nothing was called
	} else {
		name, fn := spanConnectorDispatch, connector.Dispatch
		if row.CompensatesID != nil {
			name = spanConnectorCompensate
			fn = func(ctx context.Context, call Call) (json.RawMessage, error) {
				return c.callCompensate(ctx, row, connector, call)
			}
		}
		_, elapsed, _ = callConnector(ctx, c, name, row, connector, call, fn, func(span trace.Span, result json.RawMessage, err error) {
			out = classify(result, err)
			setOutcome(span, string(out.kind), out.kind.failed(), out.err)
		})
	}
	c.metrics.dispatchSeconds.WithLabelValues(row.Connector, string(out.kind)).Observe(elapsed.Seconds())
	return out
}

// callCompensate calls the connector's Compensate with the effect that row compensates.
func (c *Client) callCompensate(ctx context.Context, row dbsqlc.ReckonEffect, connector *Connector, call Call) (json.RawMessage, error) {
	if connector.Compensate == nil {
		return nil, fmt.Errorf("connector %q has no Compensate", connector.Name)
	}
	original, err := c.queries.EffectGetByID(ctx, *row.CompensatesID)
	if err != nil {
		return nil, Retryable(fmt.Errorf("read the effect to compensate: %w", err))
	}
	return connector.Compensate(ctx, call, Original{
		EffectID: original.ID, IdempotencyKey: original.IdempotencyKey,
		BusinessKey: deref(original.BusinessKey), Args: original.Args, Result: original.Result,
	})
}

// failure is err unless it is a snooze, which is no failure: the job runs again later.
func failure(err error) error {
	var snooze *rivertype.JobSnoozeError
	if errors.As(err, &snooze) {
		return nil
	}
	return err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func attemptDetail(attempt int, jobID int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"attempt":%d,"job_id":%d}`, attempt, jobID))
}
