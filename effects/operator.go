package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
)

// OperatorOpts adjusts an operator action (Resolve, Cancel and their Tx forms). Nil means the
// defaults.
type OperatorOpts struct {
	// TenantID, when set, restricts the action to that tenant's effects: another tenant's effect
	// is ErrNotFound, exactly like a missing one, and is not touched. The check is made under the
	// effect's row lock, in the action's transaction. Default: any tenant.
	TenantID string
}

func (o *OperatorOpts) tenantID() string {
	if o == nil {
		return ""
	}
	return o.TenantID
}

// Resolution is an operator's decision on a STUCK effect (Resolve).
type Resolution struct {
	// To is the decision: CONFIRMED (it happened), FAILED (it did not) or PENDING (dispatch it
	// again, with the same idempotency key and a fresh attempt budget). Required.
	To State
	// Actor and Reason go to the audit trail (the actor as "operator:{Actor}"). Required.
	Actor, Reason string
}

// Resolve records an operator's decision on a STUCK effect, in a transaction of its own. Errors:
// ErrNotFound (also another tenant's effect, with opts.TenantID), ErrNotStuck, or a usage error (a
// decision other than CONFIRMED, FAILED or PENDING, a missing actor or reason); nothing changes
// then. A database error rolls the decision back, so Resolve can simply be called again: a
// decision that was in fact recorded makes the retry ErrNotStuck.
func (c *Client) Resolve(ctx context.Context, id uuid.UUID, r Resolution, opts *OperatorOpts) (*Effect, error) {
	effect, err := inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.ResolveTx(ctx, tx, id, r, opts) })
	if err != nil {
		return nil, err
	}
	c.countSettlement(effect.Connector, dbsqlc.ReckonEffectPolicy(effect.Policy), StateStuck, r.To, effect.CreatedAt, effect.UpdatedAt)
	return effect, nil
}

// ResolveTx is Resolve in tx, the caller's transaction: the decision (and, for PENDING, the new
// dispatch job) exists once tx commits, and not at all if it rolls back. The effect stays locked
// until then. On ErrNotFound, ErrNotStuck or a usage error nothing was written and tx is still
// usable; a database error aborts tx. ResolveTx does not count the transition in the metrics,
// since it cannot know whether tx commits.
func (c *Client) ResolveTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, r Resolution, opts *OperatorOpts) (_ *Effect, err error) {
	to := r.To
	if to != StateConfirmed && to != StateFailed && to != StatePending {
		return nil, fmt.Errorf("effects: resolve to %q: want CONFIRMED, FAILED or PENDING", to)
	}
	if r.Actor == "" || r.Reason == "" {
		return nil, errors.New("effects: resolve needs an actor and a reason")
	}
	if err := jsonx.CheckTexts("Actor", r.Actor, "Reason", r.Reason, "OperatorOpts.TenantID", opts.tenantID()); err != nil {
		return nil, fmt.Errorf("effects: resolve: %w", err)
	}
	row, err := c.lockEffect(ctx, tx, id, opts.tenantID())
	if err != nil {
		return nil, err
	}
	// In the effect's trace, linked to the operator's: a new dispatch and an owner's next move
	// continue the effect's trace.
	ctx, span := c.startEffectSpan(ctx, spanResolve, row)
	defer func() { endSpan(span, err) }()
	setOutcome(span, string(to), false, nil)
	if State(row.State) != StateStuck {
		return nil, fmt.Errorf("%w: effect %s is %s", ErrNotStuck, id, row.State)
	}
	t := transition{from: StateStuck, to: to, fence: fence{jobID: row.JobID}, actor: "operator:" + r.Actor, reason: r.Reason}
	if to == StatePending {
		if t.newJobID, err = c.insertDispatchJob(ctx, tx, id, row.TimeoutMs, time.Time{}); err != nil {
			return nil, err
		}
		// Operator gave it another go: the attempt budget starts over.
		if err := dbsqlc.New(tx).EffectResetAttempts(ctx, id); err != nil {
			return nil, err
		}
	}
	settled, err := c.settle(ctx, tx, id, t)
	if err != nil {
		return nil, err
	}
	return effectFromRow(settled), nil
}

// Cancel fails a PENDING effect that was never attempted, with actor and reason in the audit
// trail, and cancels its dispatch job (if a claimer gave it one). An effect that is in flight,
// was attempted, or is not PENDING is refused with ErrNotCancellable (ErrNotFound for none at
// all, or another tenant's with opts.TenantID), and nothing changes. A database error rolls the
// cancellation back.
func (c *Client) Cancel(ctx context.Context, id uuid.UUID, actor, reason string, opts *OperatorOpts) (*Effect, error) {
	effect, err := inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.CancelTx(ctx, tx, id, actor, reason, opts) })
	if err != nil {
		return nil, err
	}
	c.countSettlement(effect.Connector, dbsqlc.ReckonEffectPolicy(effect.Policy), StatePending, StateFailed, effect.CreatedAt, effect.UpdatedAt)
	return effect, nil
}

// CancelTx is Cancel in tx, the caller's transaction; the effect and its dispatch job stay locked
// until tx ends, so no reactor can claim the job meanwhile. On ErrNotFound, ErrNotCancellable or a
// usage error nothing was written and tx is still usable; a database error aborts tx. CancelTx
// does not count the transition in the metrics.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *OperatorOpts) (_ *Effect, err error) {
	row, err := c.lockForOperator(ctx, tx, id, "cancel", actor, reason, opts)
	if err != nil {
		return nil, err
	}
	ctx, span := c.startEffectSpan(ctx, spanCancel, row)
	defer func() { endSpan(span, err) }()
	switch {
	case State(row.State) != StatePending:
		return nil, fmt.Errorf("%w: effect %s is %s", ErrNotCancellable, id, row.State)
	case row.Attempts > 0 || row.LeaseToken != nil || (row.JobID == nil && !unclaimed(row)):
		return nil, fmt.Errorf("%w: effect %s has been attempted", ErrNotCancellable, id)
	}
	if row.JobID != nil { // else unclaimed: no claimer takes it while tx holds its lock
		job, cancelled, err := c.cancelUnstartedJobTx(ctx, tx, *row.JobID)
		if err != nil {
			return nil, err
		}
		if !cancelled {
			return nil, fmt.Errorf("%w: effect %s is in flight (dispatch job %s, attempt %d)", ErrNotCancellable, id, job.State, job.Attempt)
		}
	}
	if err := endHoldTx(ctx, tx, row, "operator:"+actor, "cancelled: "+reason); err != nil {
		return nil, err
	}
	settled, err := c.settle(ctx, tx, id, transition{
		from: StatePending, to: StateFailed, fence: fence{jobID: row.JobID},
		errMsg: "cancelled: " + reason, actor: "operator:" + actor, reason: "cancelled: " + reason,
	})
	if err != nil {
		return nil, err
	}
	return effectFromRow(settled), nil
}

// CompensateOpts adjusts a compensation (Compensate, CompensateTx). Nil means the defaults.
type CompensateOpts struct {
	// KeySuffix tells apart several compensations of one effect (a retry after a compensation
	// FAILED): the key becomes "{original key}/compensate-{suffix}". Default: none.
	KeySuffix string
	// Owner is the compensation's Spec.Owner: its owner's SettleHook runs when it settles. An
	// owner without a hook in this process is refused with ErrNoSettleHook. Default: none.
	Owner string
	// ScheduledAt delays the compensation's first dispatch. Default: as soon as a reactor is free.
	ScheduledAt time.Time
}

// Compensate is CompensateTx in a transaction of its own.
func (c *Client) Compensate(ctx context.Context, id uuid.UUID, actor, reason string, opts *CompensateOpts) (*Effect, error) {
	return inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.CompensateTx(ctx, tx, id, actor, reason, opts) })
}

// CompensateTx enqueues, in tx, the compensation of a CONFIRMED effect: a new effect of the same
// connector whose dispatch calls its Compensate with the original, under the idempotency key
// "{original key}/compensate" (plus "-{KeySuffix}"); it exists, with its dispatch job, once tx
// commits. Enqueueing the same compensation twice returns the first, marked Deduplicated, so a
// retry after an error is safe. actor and reason go to the compensation's audit trail. Errors:
// ErrNotFound, ErrNotCompensatable (not CONFIRMED, or a connector without Compensate),
// ErrNoSettleHook, and ErrPruned (that compensation was performed and has been pruned) change
// nothing and leave tx usable; a database error aborts tx.
func (c *Client) CompensateTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *CompensateOpts) (*Effect, error) {
	if opts == nil {
		opts = &CompensateOpts{}
	}
	if err := jsonx.CheckTexts("actor", actor, "reason", reason, "CompensateOpts.Owner", opts.Owner); err != nil {
		return nil, fmt.Errorf("effects: compensate: %w", err)
	}
	if err := c.checkOwner(ptr(opts.Owner)); err != nil {
		return nil, err
	}
	row, err := dbsqlc.New(tx).EffectGetByID(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return c.compensateTx(ctx, tx, row, *opts, actor, reason)
}

// compensateTx enqueues a compensation of row in tx. opts.KeySuffix tells apart several
// compensations of one effect (duplicates, retries): the key is "{original key}/compensate" plus
// "-{suffix}". It is a span, reckon.compensate, in the original's trace (linked to ctx's span when
// that is another trace), and the compensation carries that span's trace context: its dispatch
// continues the original's trace.
func (c *Client) compensateTx(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect, opts CompensateOpts, actor, reason string) (effect *Effect, err error) {
	ctx, span := c.startEffectSpan(ctx, spanCompensate, row)
	defer func() {
		if span.IsRecording() && effect != nil {
			span.SetAttributes(attribute.String("reckon.compensation.id", effect.ID.String()),
				attribute.Bool("reckon.deduplicated", effect.Deduplicated))
		}
		endSpan(span, err)
	}()
	suffix := opts.KeySuffix
	if State(row.State) != StateConfirmed {
		return nil, fmt.Errorf("%w: effect %s is %s, not CONFIRMED", ErrNotCompensatable, row.ID, row.State)
	}
	connector, err := c.registry.lookup(row.Connector)
	if err != nil {
		return nil, err
	}
	if connector.Compensate == nil {
		return nil, fmt.Errorf("%w: connector %q has no Compensate", ErrNotCompensatable, row.Connector)
	}
	key := row.IdempotencyKey + "/compensate"
	if suffix != "" {
		key += "-" + suffix
	}
	q := dbsqlc.New(tx)
	id := uuid.Must(uuid.NewV7())
	var keys orderKeys // the compensation of an ordered effect takes its place in its key's order
	var jobID *int64
	if row.OrderingKey != nil {
		keys.tenants, keys.keys = []string{row.TenantID}, []string{*row.OrderingKey}
		if _, err := keys.lockTx(ctx, tx, 0); err != nil { // it takes its original's order_seq
			return nil, err
		}
	} else if jobID, err = c.insertDispatchJob(ctx, tx, id, row.TimeoutMs, opts.ScheduledAt); err != nil {
		return nil, err
	}
	// The compensation has the original's connector, args, business key, run and turn, and the
	// timeout the original was called under; it is called through Compensate, as an idempotent
	// write, under a key of its own.
	e := effectInsert(id, &resolvedSpec{
		connector: connector, tenantID: row.TenantID, args: row.Args, idempotencyKey: key,
		businessKey: deref(row.BusinessKey), maxAttempts: connector.MaxAttempts,
		spec: Spec{RunID: deref(row.RunID), TurnID: row.TurnID, TurnGroup: deref(row.TurnGroup), Owner: opts.Owner},
	}, nil)
	e.Policy, e.Tags = dbsqlc.ReckonEffectPolicy(PolicyIdempotent), []string{string(TagWrite), string(TagIdempotent)}
	e.TimeoutMs = row.TimeoutMs
	e.CompensatesID, e.JobID, e.TraceContext = &row.ID, jobID, c.tracing.carrierOf(ctx)
	e.BusinessKeyDedup = false // the original holds the business key: a compensation never dedups against it
	e.Actor, e.Reason = actor, "compensation: "+reason
	if row.OrderingKey != nil {
		e.OrderingKey, e.OrderSeq = row.OrderingKey, row.OrderSeq
		c.waitInOrder(&e)
		if !opts.ScheduledAt.IsZero() {
			e.NotBefore = &opts.ScheduledAt
		}
	}
	compensation, err := q.EffectInsert(ctx, e)
	if err == nil && !keys.empty() {
		err = keys.handOnTx(ctx, tx)
	}
	if postgres.NoRows(err) {
		if jobID != nil {
			if _, err := c.river.JobDeleteTx(ctx, tx, *jobID); err != nil {
				return nil, err
			}
		}
		existing, err := q.EffectGetByIdempotencyKey(ctx, dbsqlc.EffectGetByIdempotencyKeyParams{TenantID: row.TenantID, IdempotencyKey: key})
		if postgres.NoRows(err) { // a compensation of that key was pruned (ErrPruned)
			return nil, prunedKeyError(ctx, q, row.TenantID, key)
		}
		if err != nil {
			return nil, err
		}
		effect := effectFromRow(existing)
		effect.Deduplicated = true
		return effect, nil
	}
	if err != nil {
		return nil, fmt.Errorf("effects: insert compensation of %s: %w", row.ID, err)
	}
	return effectFromRow(compensation), nil
}

// lockForOperator begins an operator's action (what, as its errors name it) on effect id in tx:
// it checks actor and reason, which are required and must be storable, and locks the effect
// (lockEffect).
func (c *Client) lockForOperator(ctx context.Context, tx pgx.Tx, id uuid.UUID, what, actor, reason string, opts *OperatorOpts) (dbsqlc.ReckonEffect, error) {
	if actor == "" || reason == "" {
		return dbsqlc.ReckonEffect{}, fmt.Errorf("effects: %s needs an actor and a reason", what)
	}
	if err := jsonx.CheckTexts("actor", actor, "reason", reason, "OperatorOpts.TenantID", opts.tenantID()); err != nil {
		return dbsqlc.ReckonEffect{}, fmt.Errorf("effects: %s: %w", what, err)
	}
	return c.lockEffect(ctx, tx, id, opts.tenantID())
}

// lockEffect reads effect id FOR UPDATE. With tenantID set, another tenant's effect is
// ErrNotFound.
func (c *Client) lockEffect(ctx context.Context, tx pgx.Tx, id uuid.UUID, tenantID string) (dbsqlc.ReckonEffect, error) {
	row, err := dbsqlc.New(tx).EffectGetByIDForUpdate(ctx, id)
	if postgres.NoRows(err) || (err == nil && tenantID != "" && row.TenantID != tenantID) {
		return dbsqlc.ReckonEffect{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return row, err
}

// cancelUnstartedJobTx stops an effect's dispatch job from ever calling it, if the job has not
// started: it locks the job (River fetches with SKIP LOCKED, so no reactor can claim it until tx
// ends) and reports cancelled=false when the job has run or is running. A job of the effect's own
// is cancelled; a batch job is left for its other effects, and skips this one once the caller has
// settled it in tx.
func (c *Client) cancelUnstartedJobTx(ctx context.Context, tx pgx.Tx, jobID int64) (job dbsqlc.RiverJobGetForUpdateRow, cancelled bool, err error) {
	job, err = dbsqlc.New(tx).RiverJobGetForUpdate(ctx, jobID)
	if err != nil {
		return job, false, fmt.Errorf("effects: lock dispatch job: %w", err)
	}
	if job.Attempt > 0 || (job.State != dbsqlc.RiverJobStateAvailable && job.State != dbsqlc.RiverJobStateScheduled) {
		return job, false, nil
	}
	if !job.Shared {
		if _, err := c.river.JobCancelTx(ctx, tx, job.ID); err != nil {
			return job, false, fmt.Errorf("effects: cancel dispatch job: %w", err)
		}
	}
	return job, true, nil
}
