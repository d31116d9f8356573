package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// maxOrderChain bounds the chain of an ordering key that Order reads.
const maxOrderChain = 50

// Order is where an ordered effect stands in its ordering key's order (docs/design.md, "Ordering
// keys").
type Order struct {
	// Key is the effect's ordering key.
	Key string
	// HeldBy is the effect that holds this one back: the one that has the key's turn (claimed,
	// in flight, awaiting its callback, UNKNOWN or STUCK) while this one waits. Nil when this one
	// has the turn or is settled.
	HeldBy *OrderLink
	// Chain is the key's unsettled effects in the order they get their turns — the one that has
	// it first — at most maxOrderChain of them.
	Chain []OrderLink
}

// OrderLink is one effect of an ordering key's chain.
type OrderLink struct {
	ID             uuid.UUID
	State          effects.State
	Connector      string
	IdempotencyKey string
	// Waiting: the effect waits for its turn (not yet claimable).
	Waiting   bool
	CreatedAt time.Time
}

// order reads e's place in its ordering key's order; nil for an unordered effect.
func (o *Ops) order(ctx context.Context, e *effects.Effect) (*Order, error) {
	if e.OrderingKey == "" {
		return nil, nil
	}
	rows, err := dbsqlc.New(o.pool).EffectOrderChain(ctx, dbsqlc.EffectOrderChainParams{
		TenantID: e.TenantID, OrderingKey: e.OrderingKey, MaxRows: maxOrderChain,
	})
	if err != nil {
		return nil, fmt.Errorf("ops: ordering key of %s: %w", e.ID, err)
	}
	out := &Order{Key: e.OrderingKey, Chain: make([]OrderLink, len(rows))}
	for i, row := range rows {
		out.Chain[i] = OrderLink{ID: row.ID, State: effects.State(row.State), Connector: row.Connector,
			IdempotencyKey: row.IdempotencyKey, Waiting: row.Waiting, CreatedAt: row.CreatedAt}
	}
	if len(out.Chain) > 0 && out.Chain[0].ID != e.ID && e.State != effects.StateConfirmed && e.State != effects.StateFailed {
		out.HeldBy = &out.Chain[0]
	}
	return out, nil
}

// HeldBy returns the effect that holds effect e back in its ordering key's order, or nil (e is
// unordered, has its key's turn, or is settled).
func (o *Ops) HeldBy(ctx context.Context, e *effects.Effect) (*OrderLink, error) {
	order, err := o.order(ctx, e)
	if err != nil || order == nil {
		return nil, err
	}
	return order.HeldBy, nil
}
