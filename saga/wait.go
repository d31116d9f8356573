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
// listens for the database's notification on a connection of its own for the duration (rechecking
// now and then in case a notification is lost), so keep the number of concurrent Waits well below
// the pool's size.
func (c *Client) Wait(ctx context.Context, id uuid.UUID) (*Saga, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("saga: wait for %s: %w", id, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+settledChannel); err != nil {
		return nil, fmt.Errorf("saga: wait for %s: listen: %w", id, err)
	}
	defer func() {
		// Leave the pooled connection as we found it.
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(cleanCtx, "UNLISTEN "+settledChannel); err != nil {
			conn.Conn().Close(cleanCtx) //nolint:errcheck // the pool drops a closed connection
		}
	}()
	for {
		s, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if s.State.Settled() {
			return s, nil
		}
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = conn.Conn().WaitForNotification(waitCtx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_ = err // a notification for any saga, or the recheck timeout: look again
	}
}
