package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// Evidence is everything an operator needs to decide about an effect, on one page.
type Evidence struct {
	Effect *effects.Effect
	// History is every transition, oldest first: actor, reason, attempt, and detail (what the
	// upstream said, the status checks' answers).
	History []effects.Transition
	// Compensations are the effects that undo this one, newest first.
	Compensations []*effects.Effect
	// Compensates is, for a compensation, the effect it undoes.
	Compensates *effects.Effect
	// Saga is the saga the effect is a step (or the compensation of a step) of, if any.
	Saga *saga.Saga
	// Run is the effect's run, if it has one that still exists.
	Run *effects.Run
	// Turn is the turn that decided the effect, if any and still kept.
	Turn *turns.Record
}

// Evidence returns the evidence behind effect id, or ErrNotFound (also outside the scope).
func (o *Ops) Evidence(ctx context.Context, scope Scope, id uuid.UUID) (*Evidence, error) {
	e, err := o.effect(ctx, scope, id)
	if err != nil {
		return nil, err
	}
	return o.evidence(ctx, e)
}

func (o *Ops) evidence(ctx context.Context, e *effects.Effect) (*Evidence, error) {
	ev := &Evidence{Effect: e}
	var err error
	if ev.History, err = o.effects.History(ctx, e.ID); err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	if ev.Compensations, _, err = o.effects.List(ctx, effects.ListFilter{TenantID: e.TenantID, CompensatesID: e.ID, Limit: 1000}); err != nil {
		return nil, fmt.Errorf("ops: compensations of %s: %w", e.ID, err)
	}
	if e.CompensatesID != nil {
		ev.Compensates, err = o.effects.Get(ctx, *e.CompensatesID)
		if err != nil && !errors.Is(err, effects.ErrNotFound) {
			return nil, fmt.Errorf("ops: %w", err)
		}
	}
	sagaIDs, err := dbsqlc.New(o.pool).OpsSagaOfEffect(ctx, e.ID)
	if err != nil {
		return nil, fmt.Errorf("ops: saga of %s: %w", e.ID, err)
	}
	if len(sagaIDs) > 0 {
		ev.Saga, err = o.sagas.Get(ctx, sagaIDs[0])
		if err != nil && !errors.Is(err, saga.ErrNotFound) {
			return nil, fmt.Errorf("ops: %w", err)
		}
	}
	if e.RunID != "" {
		ev.Run, err = o.effects.GetRun(ctx, e.RunID, &effects.RunOpts{TenantID: e.TenantID})
		if err != nil && !errors.Is(err, effects.ErrRunNotFound) {
			return nil, fmt.Errorf("ops: %w", err)
		}
	}
	if e.TurnID != nil {
		ev.Turn, err = o.turns.Get(ctx, *e.TurnID)
		if err != nil && !errors.Is(err, turns.ErrNotFound) {
			return nil, fmt.Errorf("ops: %w", err)
		}
	}
	return ev, nil
}

// Stuck is the STUCK queue in scope, longest stuck first, with each effect's evidence; total
// counts the whole queue, and next continues it ("" on the last page). limit is 1 to MaxLimit (0:
// DefaultLimit); after is the next of a previous page.
func (o *Ops) Stuck(ctx context.Context, scope Scope, limit int, after string) (page []*Evidence, total int, next string, err error) {
	if limit, err = checkLimit(limit); err != nil {
		return nil, 0, "", err
	}
	all, tenants := scopeParams(scope)
	params := dbsqlc.OpsStuckListParams{AllTenants: all, TenantIds: tenants, MaxRows: int32(limit)}
	if after != "" {
		at, id, err := uuidCursor(after)
		if err != nil {
			return nil, 0, "", err
		}
		params.CursorUpdatedAt, params.CursorID = &at, &id
	}
	q := dbsqlc.New(o.pool)
	count, err := q.OpsStuckCount(ctx, dbsqlc.OpsStuckCountParams{AllTenants: all, TenantIds: tenants})
	if err != nil {
		return nil, 0, "", fmt.Errorf("ops: count STUCK effects: %w", err)
	}
	rows, err := q.OpsStuckList(ctx, params)
	if err != nil {
		return nil, 0, "", fmt.Errorf("ops: list STUCK effects: %w", err)
	}
	for _, row := range rows {
		e, err := o.effects.Get(ctx, row.ID)
		if errors.Is(err, effects.ErrNotFound) { // pruned since
			continue
		}
		if err != nil {
			return nil, 0, "", fmt.Errorf("ops: %w", err)
		}
		ev, err := o.evidence(ctx, e)
		if err != nil {
			return nil, 0, "", err
		}
		page = append(page, ev)
	}
	if len(rows) == limit {
		last := rows[len(rows)-1]
		next = Cursor{At: last.UpdatedAt, ID: last.ID.String()}.String()
	}
	return page, int(count), next, nil
}
