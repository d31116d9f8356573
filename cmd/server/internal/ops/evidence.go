package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
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
	// Order is the effect's place in its ordering key's order: which effect holds it back and the
	// key's chain. Nil for an unordered effect.
	Order *Order
}

// Evidence returns the evidence behind effect id, or ErrNotFound (also outside the scope). It is
// read as for a page of the STUCK queue (Stuck), so the two agree.
func (o *Ops) Evidence(ctx context.Context, scope Scope, id uuid.UUID) (*Evidence, error) {
	e, err := o.effect(ctx, scope, id)
	if err != nil {
		return nil, err
	}
	page, err := o.evidence(ctx, []*effects.Effect{e})
	if err != nil {
		return nil, err
	}
	if page[0].Order, err = o.order(ctx, e); err != nil {
		return nil, err
	}
	return page[0], nil
}

// evidence reads the evidence of list, in its order: the histories, the compensations, the
// effects compensations undo and the sagas of steps each in one query for the whole list, then
// each saga, run and turn once however many of the effects share it.
func (o *Ops) evidence(ctx context.Context, list []*effects.Effect) ([]*Evidence, error) {
	if len(list) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(list))
	var undone []uuid.UUID
	for i, e := range list {
		ids[i] = e.ID
		if e.CompensatesID != nil {
			undone = append(undone, *e.CompensatesID)
		}
	}
	histories, err := o.effects.Histories(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	compensations, err := o.effects.Compensations(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	compensated := map[uuid.UUID]*effects.Effect{}
	if len(undone) > 0 {
		if compensated, err = o.effects.GetMany(ctx, undone); err != nil {
			return nil, fmt.Errorf("ops: %w", err)
		}
	}
	steps, err := dbsqlc.New(o.pool).OpsSagasOfEffects(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("ops: sagas of effects: %w", err)
	}
	sagaOf := make(map[uuid.UUID]uuid.UUID, len(steps))
	for _, step := range steps {
		sagaOf[step.EffectID] = step.SagaID
	}

	type runKey struct{ tenant, id string }
	sagas, runs, turnRecords := map[uuid.UUID]*saga.Saga{}, map[runKey]*effects.Run{}, map[uuid.UUID]*turns.Record{}
	page := make([]*Evidence, len(list))
	for i, e := range list {
		ev := &Evidence{Effect: e, History: histories[e.ID], Compensations: compensations[e.ID]}
		if ev.Compensations == nil {
			ev.Compensations = []*effects.Effect{}
		}
		if e.CompensatesID != nil {
			ev.Compensates = compensated[*e.CompensatesID]
		}
		if id, ok := sagaOf[e.ID]; ok {
			ev.Saga, err = readOnce(sagas, id, func() (*saga.Saga, error) { return o.sagas.Get(ctx, id) }, saga.ErrNotFound)
			if err != nil {
				return nil, fmt.Errorf("ops: %w", err)
			}
		}
		if e.RunID != "" {
			ev.Run, err = readOnce(runs, runKey{e.TenantID, e.RunID}, func() (*effects.Run, error) {
				return o.effects.GetRun(ctx, e.RunID, &effects.RunOpts{TenantID: e.TenantID})
			}, effects.ErrRunNotFound)
			if err != nil {
				return nil, fmt.Errorf("ops: %w", err)
			}
		}
		if e.TurnID != nil {
			ev.Turn, err = readOnce(turnRecords, *e.TurnID, func() (*turns.Record, error) { return o.turns.Get(ctx, *e.TurnID) }, turns.ErrNotFound)
			if err != nil {
				return nil, fmt.Errorf("ops: %w", err)
			}
		}
		page[i] = ev
	}
	return page, nil
}

// readOnce returns read() the first time it is asked for key and what it returned then
// afterwards; missing (read's error for a thing that does not exist) is nil.
func readOnce[K comparable, V any](cache map[K]*V, key K, read func() (*V, error), missing error) (*V, error) {
	if v, ok := cache[key]; ok {
		return v, nil
	}
	v, err := read()
	if errors.Is(err, missing) {
		v, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	cache[key] = v
	return v, nil
}

// Stuck is the STUCK queue in scope, longest stuck first, with each effect's evidence; total
// counts the whole queue, and next continues it ("" on the last page). limit is 1 to MaxLimit (0:
// DefaultLimit); after is the next of a previous page.
func (o *Ops) Stuck(ctx context.Context, scope Scope, limit int, after string) (page []*Evidence, total int, next string, err error) {
	all, tenants := scopeParams(scope)
	list, total, next, err := queue(ctx, o, limit, after, "STUCK effects", func(q *dbsqlc.Queries) (int64, error) {
		return q.OpsStuckCount(ctx, dbsqlc.OpsStuckCountParams{AllTenants: all, TenantIds: tenants})
	}, func(q *dbsqlc.Queries, at *time.Time, id *uuid.UUID, limit int32) ([]dbsqlc.OpsStuckListRow, error) {
		return q.OpsStuckList(ctx, dbsqlc.OpsStuckListParams{AllTenants: all, TenantIds: tenants, CursorUpdatedAt: at, CursorID: id, MaxRows: limit})
	}, func(row dbsqlc.OpsStuckListRow) (uuid.UUID, time.Time) { return row.ID, row.UpdatedAt })
	if err != nil {
		return nil, 0, "", err
	}
	if page, err = o.evidence(ctx, list); err != nil {
		return nil, 0, "", err
	}
	return page, total, next, nil
}

// queue reads a page of a queue of effects kept oldest first (what names it in errors): count
// counts the whole queue; list reads up to limit rows after the cursor (at, id; nil for the first
// page) in the queue's order; key is a row's effect id and sort time. It returns the page's
// effects (those gone since left out), the count, and the cursor of the next page ("" on the
// last).
func queue[Row any](ctx context.Context, o *Ops, limit int, after, what string, count func(*dbsqlc.Queries) (int64, error),
	list func(q *dbsqlc.Queries, at *time.Time, id *uuid.UUID, limit int32) ([]Row, error),
	key func(Row) (uuid.UUID, time.Time)) (page []*effects.Effect, total int, next string, err error) {
	if limit, err = checkLimit(limit); err != nil {
		return nil, 0, "", err
	}
	var cursorAt *time.Time
	var cursorID *uuid.UUID
	if after != "" {
		at, id, err := uuidCursor(after)
		if err != nil {
			return nil, 0, "", err
		}
		cursorAt, cursorID = &at, &id
	}
	q := dbsqlc.New(o.pool)
	n, err := count(q)
	if err != nil {
		return nil, 0, "", fmt.Errorf("ops: count %s: %w", what, err)
	}
	rows, err := list(q, cursorAt, cursorID, int32(limit))
	if err != nil {
		return nil, 0, "", fmt.Errorf("ops: list %s: %w", what, err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, row := range rows {
		ids[i], _ = key(row)
	}
	found, err := o.effects.GetMany(ctx, ids)
	if err != nil {
		return nil, 0, "", fmt.Errorf("ops: %w", err)
	}
	page = make([]*effects.Effect, 0, len(rows))
	for _, id := range ids {
		if e, ok := found[id]; ok { // else pruned since
			page = append(page, e)
		}
	}
	if len(rows) == limit {
		id, at := key(rows[len(rows)-1])
		next = pagecursor.Cursor{At: at, ID: id.String()}.String()
	}
	return page, int(n), next, nil
}
