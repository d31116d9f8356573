package saga

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// settledChannel is notified with the id of a saga that has just become COMPLETED, COMPENSATED or
// STUCK (migration 0004).
const settledChannel = "reckon_saga_settled"

// Wait returns the saga once it is settled — COMPLETED, COMPENSATED or STUCK — or ctx's error. It
// wakes on the database's notification, through the listener the effects client shares among all
// its waiters (effects.Client.Listen): a Wait holds no connection while it waits, only for each
// look at the saga. It looks again every few seconds in case the listener had to reconnect.
// Errors: ErrNotInstalled, ErrNotFound, a database error from a look, ctx's error.
func (c *Client) Wait(ctx context.Context, id uuid.UUID) (*Saga, error) {
	ec, err := c.effectsClient()
	if err != nil {
		return nil, err
	}
	sub, err := ec.Listen(ctx, settledChannel, id.String())
	if err != nil {
		return nil, fmt.Errorf("saga: wait for %s: %w", id, err)
	}
	defer sub.Close()
	recheck := time.NewTicker(5 * time.Second)
	defer recheck.Stop()
	for {
		s, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if s.State.Settled() {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-sub.C:
		case <-recheck.C:
		}
	}
}
