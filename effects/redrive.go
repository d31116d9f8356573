package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Redrive sends a FAILED effect back to PENDING, in a transaction of its own: it is dispatched
// again like a fresh enqueue, with the same idempotency key (the upstream deduplicates if the
// failure in fact took effect), a fresh attempt budget, and actor ("operator:{actor}") and reason
// in its audit trail. The database allows FAILED → PENDING only to an operator actor (migration
// 0037).
//
// Refused, with nothing changed: ErrNotFound (also another tenant's effect with opts.TenantID),
// ErrNotFailed, ErrRedriveCompensation, ErrRedriveDeclined, ErrRedriveOwned,
// ErrRedriveBusinessKeyTaken, ErrRunCancelled (its
// run was cancelled) and ErrRunMaxFailures (its run is halted by max_consecutive_failures), or a
// usage error (a missing or unstorable actor or reason). A database error rolls the redrive back,
// so Redrive can simply be called again: a redrive that was in fact recorded makes the retry
// ErrNotFailed.
func (c *Client) Redrive(ctx context.Context, id uuid.UUID, actor, reason string, opts *OperatorOpts) (*Effect, error) {
	effect, err := inTx(ctx, c, func(tx pgx.Tx) (*Effect, error) { return c.RedriveTx(ctx, tx, id, actor, reason, opts) })
	if err != nil {
		return nil, err
	}
	c.countTransition(effect.Connector, dbsqlc.ReckonEffectPolicy(effect.Policy), StateFailed, StatePending)
	return effect, nil
}

// RedriveTx is Redrive in tx, the caller's transaction: the effect is PENDING, with its new
// dispatch job, once tx commits, and FAILED still if it rolls back. The effect (and its run's
// row, if it has a run) stay locked until then. On a refusal or a usage error nothing was
// written and tx is still usable; a database error aborts tx. RedriveTx does not count the
// transition in the metrics, since it cannot know whether tx commits.
func (c *Client) RedriveTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, reason string, opts *OperatorOpts) (_ *Effect, err error) {
	row, err := c.lockForOperator(ctx, tx, id, "redrive", actor, reason, opts)
	if err != nil {
		return nil, err
	}
	ctx, span := c.startEffectSpan(ctx, spanRedrive, row)
	defer func() { endSpan(span, err) }()
	setOutcome(span, string(StatePending), false, nil)
	if err := c.checkRedrivable(ctx, tx, row); err != nil {
		return nil, err
	}
	q := dbsqlc.New(tx)
	// An ordered effect waits for its key's turn again, ahead of the key's later effects that still
	// wait (its order_seq is theirs to follow), and is claimed when the key is free (ordering.go).
	var keys orderKeys
	var newJobID *int64
	if row.OrderingKey != nil {
		keys.tenants, keys.keys = []string{row.TenantID}, []string{*row.OrderingKey}
		if _, err := keys.lockTx(ctx, tx, 0); err != nil { // it keeps its order_seq
			return nil, err
		}
	} else if newJobID, err = c.insertDispatchJob(ctx, tx, id, row.TimeoutMs, time.Time{}); err != nil {
		return nil, err
	}
	if err := q.EffectRedriveReset(ctx, dbsqlc.EffectRedriveResetParams{ID: id, Queue: c.config.Queue}); err != nil {
		return nil, fmt.Errorf("effects: redrive effect %s: %w", id, err)
	}
	settled, err := c.settle(ctx, tx, id, transition{
		from: StateFailed, to: StatePending, fence: fence{jobID: row.JobID}, newJobID: newJobID,
		actor: "operator:" + actor, reason: jsonx.SafeText("redrive: " + reason),
		detail: map[string]any{"redrive": true, "attempts_before": row.Attempts, "error_before": deref(row.Error)},
	})
	if isBusinessKeyTaken(err) { // a concurrent enqueue took the key after checkRedrivable
		return nil, fmt.Errorf("%w: effect %s, business key %q", ErrRedriveBusinessKeyTaken, id, deref(row.BusinessKey))
	}
	if err != nil {
		return nil, err
	}
	if err := keys.handOnTx(ctx, tx); err != nil {
		return nil, err
	}
	return effectFromRow(settled), nil
}

// isBusinessKeyTaken reports whether err is the refusal of reckon_effects_business_key_uniq.
func isBusinessKeyTaken(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "reckon_effects_business_key_uniq"
}

// checkRedrivable says why the locked effect row cannot be redriven (nil: it can). A run's
// refusal is checked under the run's row lock, which enqueues and CancelRun take too.
func (c *Client) checkRedrivable(ctx context.Context, tx pgx.Tx, row dbsqlc.ReckonEffect) error {
	switch {
	case State(row.State) != StateFailed:
		return fmt.Errorf("%w: effect %s is %s", ErrNotFailed, row.ID, row.State)
	case row.CompensatesID != nil:
		return fmt.Errorf("%w: effect %s compensates effect %s", ErrRedriveCompensation, row.ID, *row.CompensatesID)
	case deref(row.Confirmation) == string(ConfirmationDeclined) || deref(row.Confirmation) == string(ConfirmationExpired):
		return fmt.Errorf("%w: effect %s: confirmation %s", ErrRedriveDeclined, row.ID, *row.Confirmation)
	case row.Owner != nil:
		return fmt.Errorf("%w: effect %s is owned by %q", ErrRedriveOwned, row.ID, *row.Owner)
	}
	q := dbsqlc.New(tx)
	if row.BusinessKeyDedup && row.BusinessKey != nil {
		holder, err := q.EffectGetByBusinessKey(ctx, dbsqlc.EffectGetByBusinessKeyParams{TenantID: row.TenantID, Connector: row.Connector, BusinessKey: row.BusinessKey})
		if err == nil {
			return fmt.Errorf("%w: effect %s: business key %q is held by effect %s (%s)", ErrRedriveBusinessKeyTaken, row.ID, *row.BusinessKey, holder.ID, holder.State)
		} else if !postgres.NoRows(err) {
			return fmt.Errorf("effects: read holder of business key %q: %w", *row.BusinessKey, err)
		}
	}
	if row.RunID == nil {
		return nil
	}
	runRow, err := q.RunGetForUpdate(ctx, dbsqlc.RunGetForUpdateParams{TenantID: row.TenantID, ID: *row.RunID})
	if postgres.NoRows(err) {
		return nil // the run's row was pruned: no guardrail left to break
	}
	if err != nil {
		return fmt.Errorf("effects: lock run %q: %w", *row.RunID, err)
	}
	run, err := loadRun(ctx, q, runRow)
	if err != nil {
		return err
	}
	// max_steps does not apply: a redrive adds no step.
	if run.CancelledAt != nil || (run.MaxConsecutiveFailures > 0 && run.ConsecutiveFailures >= run.MaxConsecutiveFailures) {
		return fmt.Errorf("effects: redrive effect %s: %w", row.ID, run.refusal(0))
	}
	return nil
}
