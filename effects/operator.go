package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Resolve records an operator's decision on a STUCK effect: CONFIRMED (it happened), FAILED (it
// did not) or PENDING (dispatch it again, with the same idempotency key). actor and reason are
// required and go to the audit trail. Errors: ErrNotFound, ErrNotStuck, or a usage error for
// another target state; nothing changes then.
func (c *Client) Resolve(ctx context.Context, id uuid.UUID, to State, actor, reason string) (*Effect, error) {
	if to != StateConfirmed && to != StateFailed && to != StatePending {
		return nil, fmt.Errorf("effects: resolve to %q: want CONFIRMED, FAILED or PENDING", to)
	}
	if actor == "" || reason == "" {
		return nil, errors.New("effects: resolve needs an actor and a reason")
	}
	var settled dbsqlc.ReckonEffect
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		row, err := c.lockEffect(ctx, tx, id)
		if err != nil {
			return err
		}
		if State(row.State) != StateStuck {
			return fmt.Errorf("%w: effect %s is %s", ErrNotStuck, id, row.State)
		}
		t := transition{from: StateStuck, to: to, fence: fence{jobID: row.JobID}, actor: "operator:" + actor, reason: reason}
		if to == StatePending {
			if t.newJobID, err = c.insertDispatchJob(ctx, tx, id, row.TimeoutMs, time.Time{}); err != nil {
				return err
			}
			// Operator gave it another go: the attempt budget starts over.
			if err := dbsqlc.New(tx).EffectResetAttempts(ctx, id); err != nil {
				return err
			}
		}
		settled, _, err = c.settle(ctx, tx, id, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.countTransition(settled.Connector, settled.Policy, StateStuck, to)
	return effectFromRow(settled), nil
}

// Cancel fails a PENDING effect that was never attempted, with actor and reason in the audit
// trail, and cancels its dispatch job. An effect that is in flight, was attempted, or is not
// PENDING is refused with ErrNotCancellable (ErrNotFound for none at all), and nothing changes.
func (c *Client) Cancel(ctx context.Context, id uuid.UUID, actor, reason string) (*Effect, error) {
	if actor == "" || reason == "" {
		return nil, errors.New("effects: cancel needs an actor and a reason")
	}
	var settled dbsqlc.ReckonEffect
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		row, err := c.lockEffect(ctx, tx, id)
		if err != nil {
			return err
		}
		switch {
		case State(row.State) != StatePending:
			return fmt.Errorf("%w: effect %s is %s", ErrNotCancellable, id, row.State)
		case row.Attempts > 0 || row.LeaseToken != nil || row.JobID == nil:
			return fmt.Errorf("%w: effect %s has been attempted", ErrNotCancellable, id)
		}
		// Lock the job: River fetches with SKIP LOCKED, so no reactor can claim it until we commit.
		job, err := dbsqlc.New(tx).RiverJobGetForUpdate(ctx, *row.JobID)
		if err != nil {
			return fmt.Errorf("effects: lock dispatch job: %w", err)
		}
		if job.Attempt > 0 || (job.State != dbsqlc.RiverJobStateAvailable && job.State != dbsqlc.RiverJobStateScheduled) {
			return fmt.Errorf("%w: effect %s is in flight (dispatch job %s, attempt %d)", ErrNotCancellable, id, job.State, job.Attempt)
		}
		if _, err := c.river.JobCancelTx(ctx, tx, job.ID); err != nil {
			return fmt.Errorf("effects: cancel dispatch job: %w", err)
		}
		settled, _, err = c.settle(ctx, tx, id, transition{
			from: StatePending, to: StateFailed, fence: fence{jobID: row.JobID},
			errMsg: "cancelled: " + reason, actor: "operator:" + actor, reason: "cancelled: " + reason,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	c.countTransition(settled.Connector, settled.Policy, StatePending, StateFailed)
	return effectFromRow(settled), nil
}

// CompensateTx enqueues, in tx, the compensation of a CONFIRMED effect: a new effect of the same
// connector whose dispatch calls its Compensate with the original, under the idempotency key
// "{original key}/compensate". Enqueueing it twice returns the first. Errors: ErrNotFound,
// ErrNotCompensatable.
func (c *Client) CompensateTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string) (*Effect, error) {
	row, err := dbsqlc.New(tx).EffectGetByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return c.compensateTx(ctx, tx, row, CompensateOpts{}, actor, reason)
}

// CompensateOpts adjusts CompensateWithTx.
type CompensateOpts struct {
	// KeySuffix tells apart several compensations of one effect (a retry after a compensation
	// FAILED): the key becomes "{original key}/compensate-{suffix}". Default: none.
	KeySuffix string
	// Owner is the compensation's Spec.Owner: its owner's SettleHook runs when it settles. Default:
	// none.
	Owner string
	// ScheduledAt delays the compensation's first dispatch. Default: as soon as a reactor is free.
	ScheduledAt time.Time
}

// CompensateWithTx is CompensateTx with options: a key suffix for another compensation of the same
// effect, an owner, a delay. Nil opts is CompensateTx. An Owner without a hook in this process is
// refused with ErrNoSettleHook.
func (c *Client) CompensateWithTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *CompensateOpts) (*Effect, error) {
	if opts == nil {
		opts = &CompensateOpts{}
	}
	if err := c.checkOwner(ptr(opts.Owner)); err != nil {
		return nil, err
	}
	row, err := dbsqlc.New(tx).EffectGetByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return c.compensateTx(ctx, tx, row, *opts, actor, reason)
}

// compensateTx enqueues a compensation of row in tx. opts.KeySuffix tells apart several
// compensations of one effect (duplicates, retries): the key is "{original key}/compensate" plus
// "-{suffix}".
func (c *Client) compensateTx(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect, opts CompensateOpts, actor, reason string) (*Effect, error) {
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
	jobID, err := c.insertDispatchJob(ctx, tx, id, row.TimeoutMs, opts.ScheduledAt)
	if err != nil {
		return nil, err
	}
	compensation, err := q.EffectInsert(ctx, dbsqlc.EffectInsertParams{
		ID: id, TenantID: row.TenantID, Connector: row.Connector, Args: row.Args, IdempotencyKey: key,
		BusinessKey: row.BusinessKey, Policy: dbsqlc.ReckonEffectPolicy(PolicyIdempotent),
		Tags: []string{string(TagWrite), string(TagIdempotent)}, MaxAttempts: int32(connector.MaxAttempts),
		TimeoutMs: row.TimeoutMs, RunID: row.RunID, TurnID: row.TurnID, TurnGroup: row.TurnGroup,
		CompensatesID: &row.ID, JobID: jobID, Owner: ptr(opts.Owner), Actor: actor, Reason: "compensation: " + reason,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := c.river.JobDeleteTx(ctx, tx, *jobID); err != nil {
			return nil, err
		}
		existing, err := q.EffectGetByIdempotencyKey(ctx, dbsqlc.EffectGetByIdempotencyKeyParams{TenantID: row.TenantID, IdempotencyKey: key})
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

func (c *Client) lockEffect(ctx context.Context, tx pgx.Tx, id uuid.UUID) (dbsqlc.ReckonEffect, error) {
	row, err := dbsqlc.New(tx).EffectGetByIDForUpdate(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return row, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return row, err
}
