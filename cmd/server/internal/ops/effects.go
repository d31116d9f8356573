package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Effects lists the effects f selects, newest first, and the cursor of the next page ("" on the
// last). Each tenant's effects are read from an index and merged (effects.Client.List), so that no
// filter scans the table.
func (o *Ops) Effects(ctx context.Context, f EffectFilter) (page []*effects.Effect, next string, err error) {
	filter, err := o.listFilter(ctx, f)
	if err != nil || filter == nil {
		return nil, "", err
	}
	page, cursor, err := o.effects.List(ctx, *filter)
	if err != nil {
		return nil, "", fmt.Errorf("ops: list effects: %w", err)
	}
	if cursor != nil {
		next = pagecursor.Cursor{At: cursor.CreatedAt, ID: cursor.ID.String()}.String()
	}
	return page, next, nil
}

// listFilter is f as effects.List takes it; nil when f can match nothing (a tenant outside the
// scope, an empty scope).
func (o *Ops) listFilter(ctx context.Context, f EffectFilter) (*effects.ListFilter, error) {
	limit, err := checkLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	tenants, err := f.Scope.tenantIDs(ctx, f.Tenant, dbsqlc.New(o.pool).OpsEffectTenants)
	if err != nil {
		return nil, fmt.Errorf("ops: tenants of effects: %w", err)
	}
	if len(tenants) == 0 {
		return nil, nil
	}
	filter := &effects.ListFilter{
		TenantIDs: tenants, State: f.State, Connector: f.Connector, RunID: f.RunID,
		IdempotencyKey: f.IdempotencyKey, BusinessKey: f.BusinessKey, TurnID: f.TurnID,
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, Limit: limit,
	}
	if f.After != "" {
		at, id, err := uuidCursor(f.After)
		if err != nil {
			return nil, err
		}
		filter.After = &effects.Cursor{CreatedAt: at, ID: id}
	}
	return filter, nil
}

// scopeParams is a scope as the ops queries take it: every tenant, or the ones listed.
func scopeParams(scope Scope) (all bool, tenants []string) {
	if scope.Tenants == nil {
		return true, []string{}
	}
	return false, scope.Tenants
}

// effect reads effect id if scope sees it, else ErrNotFound.
func (o *Ops) effect(ctx context.Context, scope Scope, id uuid.UUID) (*effects.Effect, error) {
	e, err := o.effects.Get(ctx, id)
	if errors.Is(err, effects.ErrNotFound) || (err == nil && !scope.Sees(e.TenantID)) {
		return nil, fmt.Errorf("%w: effect %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	return e, nil
}

// operatorOpts limits an action on e to its tenant, checked again under the row lock.
func operatorOpts(e *effects.Effect) *effects.OperatorOpts {
	return &effects.OperatorOpts{TenantID: e.TenantID}
}

// Resolve records an operator's decision on a STUCK effect in scope: to is CONFIRMED, FAILED or
// PENDING (dispatch it again). actor is recorded as "operator:{actor}" with reason in the audit
// trail. Errors: ErrNotFound (also outside the scope), effects.ErrNotStuck, a *FieldError for a bad
// to, actor or reason; nothing changes then.
func (o *Ops) Resolve(ctx context.Context, scope Scope, id uuid.UUID, to effects.State, actor, reason string) (*effects.Effect, error) {
	to, err := ParseResolveTarget(string(to))
	if err != nil {
		return nil, err
	}
	if err := CheckAction(actor, reason); err != nil {
		return nil, err
	}
	e, err := o.effect(ctx, scope, id)
	if err != nil {
		return nil, err
	}
	resolved, err := o.effects.Resolve(ctx, id, effects.Resolution{To: to, Actor: actor, Reason: reason}, operatorOpts(e))
	if errors.Is(err, effects.ErrNotFound) {
		return nil, fmt.Errorf("%w: effect %s", ErrNotFound, id)
	}
	return resolved, err
}

// Cancel fails a PENDING effect in scope that was never attempted (effects.Client.Cancel), with
// actor ("operator:{actor}") and reason in the audit trail. Errors: ErrNotFound (also outside the
// scope), effects.ErrNotCancellable, a *FieldError for a bad actor or reason; nothing changes then.
func (o *Ops) Cancel(ctx context.Context, scope Scope, id uuid.UUID, actor, reason string) (*effects.Effect, error) {
	return o.decide(ctx, scope, id, actor, reason, func(opts *effects.OperatorOpts) (*effects.Effect, error) {
		return o.effects.Cancel(ctx, id, actor, reason, opts) // it records "operator:{actor}" itself
	})
}

// Redrive sends a FAILED effect in scope back to PENDING (effects.Client.Redrive): it is
// dispatched again with the same idempotency key and a fresh attempt budget, by
// "operator:{actor}" with reason in the audit trail. Errors: ErrNotFound (also outside the
// scope), effects.ErrNotFailed, a refusal (RedriveRefused), a *FieldError for a bad actor or
// reason; nothing changes then.
func (o *Ops) Redrive(ctx context.Context, scope Scope, id uuid.UUID, actor, reason string) (*effects.Effect, error) {
	return o.decide(ctx, scope, id, actor, reason, func(opts *effects.OperatorOpts) (*effects.Effect, error) {
		return o.effects.Redrive(ctx, id, actor, reason, opts) // it records "operator:{actor}" itself
	})
}

// RedriveRefused reports whether err is a redrive's refusal of a FAILED effect: a compensation,
// an owned effect (a saga step), a declined or expired confirmation, a business key a newer
// effect holds (effects.ErrRedriveBusinessKeyTaken), or a run that was cancelled
// or is halted by its failures.
func RedriveRefused(err error) bool {
	for _, refusal := range []error{effects.ErrRedriveCompensation, effects.ErrRedriveDeclined, effects.ErrRedriveOwned, effects.ErrRedriveBusinessKeyTaken,
		effects.ErrRunCancelled, effects.ErrRunMaxFailures} {
		if errors.Is(err, refusal) {
			return true
		}
	}
	return false
}

// Confirm confirms an effect in scope awaiting its confirmation (effects.Client.Confirm), by
// "operator:{actor}". Errors as Cancel's, with effects.ErrNotAwaitingConfirmation and
// effects.ErrFourEyes.
func (o *Ops) Confirm(ctx context.Context, scope Scope, id uuid.UUID, actor, reason string) (*effects.Effect, error) {
	return o.decide(ctx, scope, id, actor, reason, func(opts *effects.OperatorOpts) (*effects.Effect, error) {
		return o.effects.Confirm(ctx, id, "operator:"+actor, reason, opts)
	})
}

// Decline declines an effect in scope awaiting its confirmation (effects.Client.Decline): it is
// FAILED, by "operator:{actor}". Errors as Cancel's, with effects.ErrNotAwaitingConfirmation.
func (o *Ops) Decline(ctx context.Context, scope Scope, id uuid.UUID, actor, reason string) (*effects.Effect, error) {
	return o.decide(ctx, scope, id, actor, reason, func(opts *effects.OperatorOpts) (*effects.Effect, error) {
		return o.effects.Decline(ctx, id, "operator:"+actor, reason, opts)
	})
}

// decide checks an operator's decision on effect id, finds the effect in scope, and makes the
// decision with the effect's tenant.
func (o *Ops) decide(ctx context.Context, scope Scope, id uuid.UUID, actor, reason string,
	decision func(*effects.OperatorOpts) (*effects.Effect, error)) (*effects.Effect, error) {
	if err := CheckAction(actor, reason); err != nil {
		return nil, err
	}
	e, err := o.effect(ctx, scope, id)
	if err != nil {
		return nil, err
	}
	decided, err := decision(operatorOpts(e))
	if errors.Is(err, effects.ErrNotFound) {
		return nil, fmt.Errorf("%w: effect %s", ErrNotFound, id)
	}
	return decided, err
}
