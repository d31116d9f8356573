package effects

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// Job args. Effects are looked up by id; the timeout lets River bound the worker before it reads
// the effect.

// A dispatch job carries one effect (EffectID) or, for effects enqueued together, a batch of them
// (EffectIDs); TimeoutMS is then the longest of their timeouts.
type dispatchArgs struct {
	EffectID  *uuid.UUID  `json:"effect_id,omitempty"`
	EffectIDs []uuid.UUID `json:"effect_ids,omitempty"`
	TimeoutMS int32       `json:"timeout_ms"`
}

func (dispatchArgs) Kind() string       { return "reckon_dispatch" }
func (a dispatchArgs) timeoutMS() int32 { return a.TimeoutMS }

// shared reports whether the job carries a batch of effects.
func (a dispatchArgs) shared() bool { return a.EffectID == nil }

type reconcileArgs struct {
	EffectID  uuid.UUID `json:"effect_id"`
	TimeoutMS int32     `json:"timeout_ms"`
}

func (reconcileArgs) Kind() string       { return "reckon_reconcile" }
func (a reconcileArgs) timeoutMS() int32 { return a.TimeoutMS }

// timedArgs are the args of a job that calls an effect's connector, or may: TimeoutMS, the
// connector's timeout, bounds the call.
type timedArgs interface {
	river.JobArgs
	timeoutMS() int32
}

// effectWorker is what the workers of an effect's jobs (dispatch, reconcile, deadline) share: the
// client, and River's timeout for a run — the connector's timeout and Config.InFlightMargin.
type effectWorker[T timedArgs] struct {
	river.WorkerDefaults[T]
	client *Client
}

func (w *effectWorker[T]) Timeout(job *river.Job[T]) time.Duration {
	return time.Duration(job.Args.timeoutMS())*time.Millisecond + w.client.config.InFlightMargin
}

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
