package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// fence identifies the owner of an attempt: the River job the effect belongs to, or, for an
// inline attempt, its lease token. Outcome writes succeed only while the effect still belongs to
// the same owner.
type fence struct {
	jobID      *int64
	leaseToken *uuid.UUID
	// sharedJob: the job carries other effects too (a batch dispatch job), so it is neither
	// snoozed nor completed for this one; an effect that must wait is handed to a job of its own.
	sharedJob bool
}

// transition is one fenced state change, with the follow-up job that takes the effect over.
type transition struct {
	from, to  State
	fence     fence
	attempted int // attempts to add to the effect's count
	result    json.RawMessage
	errMsg    string
	newJobID  *int64
	actor     string
	reason    string
	detail    map[string]any
}

// settle writes t in tx. It returns errFencedOut (and writes nothing; tx stays usable) when the
// effect is no longer in t.from or no longer belongs to t.fence: someone else decided first. It is
// the one place an effect
// changes state: for an owned effect that becomes CONFIRMED, FAILED or STUCK it runs the owner's
// SettleHook in tx, and the hook's error (or a missing hook) fails the write.
func (c *Client) settle(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, t transition) (row dbsqlc.ReckonEffect, err error) {
	detail, err := marshalDetail(t.detail)
	if err != nil {
		return row, err
	}
	row, err = dbsqlc.New(tx).EffectSettle(ctx, dbsqlc.EffectSettleParams{
		ID:         effectID,
		FromState:  dbsqlc.ReckonEffectState(t.from),
		ToState:    dbsqlc.ReckonEffectState(t.to),
		Attempted:  int32(t.attempted),
		Result:     t.result,
		Error:      ptr(t.errMsg),
		NewJobID:   t.newJobID,
		Actor:      t.actor,
		Reason:     t.reason,
		Detail:     detail,
		LeaseToken: t.fence.leaseToken,
		JobID:      t.fence.jobID,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return row, errFencedOut
	}
	if err != nil {
		return row, fmt.Errorf("effects: %s -> %s of effect %s: %w", t.from, t.to, effectID, err)
	}
	// The owner learns of the settlement in this same transaction; its error rolls it back.
	if err := c.runHook(ctx, tx, effectFromRow(row)); err != nil {
		return row, err
	}
	return row, nil
}

// observeFencedOut records, outside any transaction that failed, what a fenced-out writer saw.
func (c *Client) observeFencedOut(ctx context.Context, effectID uuid.UUID, connector, actor, what string, detail map[string]any) {
	// Counted once the observation is written (or has failed to be), so that whoever sees the
	// count also finds the audit row.
	defer c.metrics.fenced.WithLabelValues(connector).Inc()
	raw, _ := marshalDetail(detail)
	err := c.queries.EffectObservationInsert(ctx, dbsqlc.EffectObservationInsertParams{
		EffectID: effectID, Actor: actor, Reason: "fenced out: " + what, Detail: raw,
	})
	if err != nil {
		c.logger.ErrorContext(ctx, "record fenced-out outcome", slog.String("effect_id", effectID.String()), slog.String("error", err.Error()))
		return
	}
	c.logger.InfoContext(ctx, "fenced out: the effect moved on before this outcome was written",
		slog.String("effect_id", effectID.String()), slog.String("outcome", what))
}

func marshalDetail(detail map[string]any) (json.RawMessage, error) {
	if len(detail) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return nil, fmt.Errorf("effects: transition detail: %w", err)
	}
	return raw, nil
}

// Job args. Effects are looked up by id; the timeout lets River bound the worker before it reads
// the effect.

// A dispatch job carries one effect (EffectID) or, for effects enqueued together, a batch of them
// (EffectIDs); TimeoutMS is then the longest of their timeouts.
type dispatchArgs struct {
	EffectID  *uuid.UUID  `json:"effect_id,omitempty"`
	EffectIDs []uuid.UUID `json:"effect_ids,omitempty"`
	TimeoutMS int32       `json:"timeout_ms"`
}

func (dispatchArgs) Kind() string { return "reckon_dispatch" }

// shared reports whether the job carries a batch of effects.
func (a dispatchArgs) shared() bool { return a.EffectID == nil }

type reconcileArgs struct {
	EffectID  uuid.UUID `json:"effect_id"`
	TimeoutMS int32     `json:"timeout_ms"`
}

func (reconcileArgs) Kind() string { return "reckon_reconcile" }

// dispatchJobMaxAttempts bounds how often River runs one dispatch job. A run after the first means
// the one before was interrupted, which a non-idempotent effect answers by becoming UNKNOWN, so
// only retry-safe effects ever use more than two.
const dispatchJobMaxAttempts = 10

func (c *Client) dispatchInsertParams(effectID uuid.UUID, timeoutMS int32, scheduledAt time.Time) river.InsertManyParams {
	return river.InsertManyParams{
		Args:       dispatchArgs{EffectID: &effectID, TimeoutMS: timeoutMS},
		InsertOpts: c.dispatchInsertOpts(scheduledAt),
	}
}

func (c *Client) dispatchInsertOpts(scheduledAt time.Time) *river.InsertOpts {
	return &river.InsertOpts{Queue: c.config.Queue, MaxAttempts: dispatchJobMaxAttempts, ScheduledAt: scheduledAt}
}

func (c *Client) insertDispatchJob(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, timeoutMS int32, scheduledAt time.Time) (*int64, error) {
	p := c.dispatchInsertParams(effectID, timeoutMS, scheduledAt)
	res, err := c.river.InsertTx(ctx, tx, p.Args, p.InsertOpts)
	if err != nil {
		return nil, fmt.Errorf("effects: insert dispatch job: %w", err)
	}
	return &res.Job.ID, nil
}

func (c *Client) insertReconcileJob(ctx context.Context, tx pgx.Tx, effectID uuid.UUID, timeoutMS int32, connector string) (*int64, error) {
	maxAttempts := defaultStatusCheckLimit + 5
	if conn, ok := c.registry.Get(connector); ok {
		maxAttempts = conn.StatusCheckLimit + 5
	}
	res, err := c.river.InsertTx(ctx, tx, reconcileArgs{EffectID: effectID, TimeoutMS: timeoutMS},
		&river.InsertOpts{Queue: c.config.Queue, MaxAttempts: maxAttempts})
	if err != nil {
		return nil, fmt.Errorf("effects: insert reconcile job: %w", err)
	}
	return &res.Job.ID, nil
}

// outcome is a classified connector answer.
type outcome struct {
	kind          outcomeKind
	correlationID string // of an accepted outcome
	result        json.RawMessage
	err           error
	retryAfter    time.Duration
}

type outcomeKind string

const (
	outcomeConfirmed outcomeKind = "confirmed"
	outcomeFailed    outcomeKind = "failed"
	outcomeRetry     outcomeKind = "retryable"
	outcomeUnknown   outcomeKind = "unknown"
	outcomeAccepted  outcomeKind = "accepted" // awaiting a callback (pending.go)
)

// classify sorts a connector's answer conservatively: only a nil error confirms, only Permanent
// fails, only Retryable retries; everything else — timeouts included — is UNKNOWN.
func classify(result json.RawMessage, err error) outcome {
	var retryable *RetryableError
	switch {
	case err == nil:
		if len(result) > 0 && !json.Valid(result) {
			return outcome{kind: outcomeUnknown, err: errors.New("connector returned a result that is not valid JSON")}
		}
		return outcome{kind: outcomeConfirmed, result: result}
	case IsPermanent(err):
		return outcome{kind: outcomeFailed, err: err}
	case errors.As(err, &retryable):
		return outcome{kind: outcomeRetry, err: err, retryAfter: retryable.After}
	case isAccepted(err):
		return classifyAccepted(err)
	default:
		return outcome{kind: outcomeUnknown, err: err}
	}
}

// recordAttempt writes the outcome of a dispatch attempt in tx, fenced by f, with the follow-up
// job it needs. It returns the delay after which a retryable effect is tried again (zero
// otherwise). When fenced is true the caller must roll tx back: a follow-up job may have been
// inserted for nothing.
func (c *Client) recordAttempt(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect, connector *Connector, f fence, actor string, out outcome) (settled dbsqlc.ReckonEffect, retryIn time.Duration, err error) {
	t := transition{from: StatePending, fence: f, attempted: 1, actor: actor}
	if out.err != nil {
		t.errMsg = out.err.Error()
	}
	attempt := int(row.Attempts) + 1
	switch out.kind {
	case outcomeConfirmed:
		t.to, t.result, t.reason = StateConfirmed, out.result, "dispatch succeeded"
	case outcomeFailed:
		t.to, t.reason = StateFailed, "permanent failure"
	case outcomeRetry:
		if attempt >= int(row.MaxAttempts) {
			t.to, t.reason = StateFailed, fmt.Sprintf("retry budget spent: %d attempts, none applied", attempt)
			break
		}
		// A cancelled run is not tried again — but a compensation is: it undoes what the run did.
		if cancelled, err := c.runCancelledTx(ctx, tx, row.RunID); err != nil {
			return settled, 0, err
		} else if cancelled && row.CompensatesID == nil { // run.go
			t.to, t.reason = StateFailed, "retryable failure, none applied, and the run was cancelled: not tried again"
			break
		}
		retryIn = out.retryAfter // the upstream's own Retry-After is kept as given
		if retryIn <= 0 {
			retryIn = connector.retryDelay(attempt)
		}
		// A dispatch job of its own tries again itself, after a snooze; an inline attempt or a
		// batch job hands the effect to a dispatch job scheduled after the backoff.
		retryJob := f.jobID
		if retryJob == nil || f.sharedJob {
			if retryJob, err = c.insertDispatchJob(ctx, tx, row.ID, row.TimeoutMs, time.Now().Add(retryIn)); err != nil {
				return settled, 0, err
			}
		}
		settled, err = dbsqlc.New(tx).EffectRetryLater(ctx, dbsqlc.EffectRetryLaterParams{
			ID: row.ID, Error: t.errMsg, NewJobID: *retryJob, LeaseToken: f.leaseToken, JobID: f.jobID,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return settled, 0, errFencedOut
		}
		return settled, retryIn, err
	case outcomeAccepted:
		settled, err = c.recordAccepted(ctx, tx, row, connector, f, actor, out.correlationID)
		return settled, 0, err
	default:
		t.to, t.reason = StateUnknown, "outcome unknown: "+t.errMsg
		if t.newJobID, err = c.insertReconcileJob(ctx, tx, row.ID, row.TimeoutMs, row.Connector); err != nil {
			return settled, 0, err
		}
	}
	t.detail = map[string]any{"attempt": attempt}
	if f.jobID != nil {
		t.detail["job_id"] = *f.jobID
	}
	settled, err = c.settle(ctx, tx, row.ID, t)
	return settled, 0, err
}

// countTransition counts a committed transition in the metrics.
func (c *Client) countTransition(connector string, policy dbsqlc.ReckonEffectPolicy, from, to State) {
	c.metrics.transitions.WithLabelValues(connector, string(policy), string(from), string(to)).Inc()
}

// completeDispatchTx completes a dispatch job inside tx, unless the job carries other effects too:
// a batch job completes when its last effect is done (River completes it when Work returns).
func completeDispatchTx(ctx context.Context, tx pgx.Tx, job *river.Job[dispatchArgs]) error {
	if job.Args.shared() {
		return nil
	}
	return completeJobTx(ctx, tx, job)
}

// completeJobTx completes a running River job inside tx.
func completeJobTx[T river.JobArgs](ctx context.Context, tx pgx.Tx, job *river.Job[T]) error {
	if _, err := river.JobCompleteTx[*riverDriver](ctx, tx, job); err != nil {
		return fmt.Errorf("effects: complete job %d: %w", job.ID, err)
	}
	return nil
}
