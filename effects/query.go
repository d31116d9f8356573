package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/postgres"
)

// Get returns the effect with id, or ErrNotFound.
func (c *Client) Get(ctx context.Context, id uuid.UUID) (*Effect, error) {
	return c.get(ctx, c.queries, id)
}

// GetTx is Get in tx, the caller's transaction: it sees what tx has written, and takes no lock.
// ErrNotFound leaves tx usable; a database error aborts it.
func (c *Client) GetTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*Effect, error) {
	return c.get(ctx, dbsqlc.New(tx), id)
}

func (c *Client) get(ctx context.Context, q *dbsqlc.Queries, id uuid.UUID) (*Effect, error) {
	row, err := q.EffectGetByID(ctx, id)
	if postgres.NoRows(err) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("effects: get %s: %w", id, err)
	}
	return effectFromRow(row), nil
}

// History returns the audit trail of an effect, oldest first (empty for an unknown id).
func (c *Client) History(ctx context.Context, id uuid.UUID) ([]Transition, error) {
	histories, err := c.Histories(ctx, []uuid.UUID{id})
	if err != nil {
		return nil, err
	}
	if histories[id] == nil {
		return []Transition{}, nil
	}
	return histories[id], nil
}

// GetMany returns the effects of ids that exist, by id, read in one query.
func (c *Client) GetMany(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*Effect, error) {
	rows, err := c.queries.EffectListByIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("effects: get %d effects: %w", len(ids), err)
	}
	out := make(map[uuid.UUID]*Effect, len(rows))
	for _, row := range rows {
		out[row.ID] = effectFromRow(row)
	}
	return out, nil
}

// Histories returns the audit trails of the effects ids, each oldest first, by effect id (none
// for an unknown id), read in one query.
func (c *Client) Histories(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]Transition, error) {
	rows, err := c.queries.EffectTransitionListByEffects(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("effects: histories of %d effects: %w", len(ids), err)
	}
	out := make(map[uuid.UUID][]Transition, len(ids))
	for _, row := range rows {
		out[row.EffectID] = append(out[row.EffectID], transitionFromRow(row))
	}
	return out, nil
}

// Compensations returns the compensations of the effects ids, each's newest first, by the id of
// the effect they undo, read in one query.
func (c *Client) Compensations(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]*Effect, error) {
	rows, err := c.queries.EffectListCompensationsOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("effects: compensations of %d effects: %w", len(ids), err)
	}
	out := make(map[uuid.UUID][]*Effect, len(ids))
	for _, row := range rows {
		out[*row.CompensatesID] = append(out[*row.CompensatesID], effectFromRow(row))
	}
	return out, nil
}

// ListFilter selects effects for List. TenantID defaults to DefaultTenant; the other filters
// apply when set.
type ListFilter struct {
	TenantID string
	// TenantIDs, when set, lists the effects of all these tenants at once (TenantID must then be
	// empty). Each tenant's effects are read from an index of their own and merged, so a listing
	// costs about the same per tenant as for one.
	TenantIDs      []string
	State          State
	Connector      string
	RunID          string
	IdempotencyKey string
	BusinessKey    string
	TurnID         uuid.UUID // zero: any
	// CompensatesID, when set, lists the compensations of that effect.
	CompensatesID uuid.UUID
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Limit bounds the page. Default 100, at most 1000.
	Limit int
	// After continues a listing: pass the Cursor of the previous page.
	After *Cursor
}

// Cursor marks where a page of List ended.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// List returns effects matching filter, newest first, and the cursor of the next page (nil when
// this page is the last). It reads in a transaction of its own whose statements are planned for
// the filter given, so that a selective filter (a key, a run, a turn, STUCK) uses its index even
// after many listings with other filters.
func (c *Client) List(ctx context.Context, filter ListFilter) ([]*Effect, *Cursor, error) {
	params := dbsqlc.EffectListParams{TenantIds: filter.TenantIDs, MaxRows: int32(filter.Limit)}
	switch {
	case len(filter.TenantIDs) > 0 && filter.TenantID != "":
		return nil, nil, errors.New("effects: list: TenantID and TenantIDs both set")
	case len(filter.TenantIDs) == 0 && filter.TenantID == "":
		params.TenantIds = []string{DefaultTenant}
	case len(filter.TenantIDs) == 0:
		params.TenantIds = []string{filter.TenantID}
	}
	switch {
	case filter.Limit == 0:
		params.MaxRows = 100
	case filter.Limit < 0 || filter.Limit > 1000:
		return nil, nil, fmt.Errorf("effects: list limit %d out of range (1 to 1000)", filter.Limit)
	}
	if filter.State != "" {
		if _, err := ParseState(string(filter.State)); err != nil {
			return nil, nil, err
		}
		state := dbsqlc.ReckonEffectState(filter.State)
		params.State = &state
	}
	params.Connector = ptr(filter.Connector)
	params.RunID = ptr(filter.RunID)
	params.IdempotencyKey = ptr(filter.IdempotencyKey)
	params.BusinessKey = ptr(filter.BusinessKey)
	params.TurnID = ptr(filter.TurnID)
	params.CompensatesID = ptr(filter.CompensatesID)
	params.CreatedAfter = ptr(filter.CreatedAfter)
	params.CreatedBefore = ptr(filter.CreatedBefore)
	if filter.After != nil {
		params.CursorCreatedAt, params.CursorID = &filter.After.CreatedAt, &filter.After.ID
	}
	var rows []dbsqlc.ReckonEffect
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.EffectListPlanCustom(ctx); err != nil {
			return err
		}
		var err error
		rows, err = q.EffectList(ctx, params)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("effects: list: %w", err)
	}
	effects := make([]*Effect, len(rows))
	for i, row := range rows {
		effects[i] = effectFromRow(row)
	}
	var next *Cursor
	if len(rows) == int(params.MaxRows) {
		last := rows[len(rows)-1]
		next = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return effects, next, nil
}
