package effects

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/internal/recovery"
)

// SettleHook is told, inside the transaction that writes it, that an effect of its owner has
// become CONFIRMED, FAILED or STUCK. It may write in tx (enqueue the next effect of a saga, update
// its own tables); an error rolls the whole transition back, so the effect stays where it was and
// the writer tries again later (a dispatch or reconcile job is retried; an operator's Resolve
// returns the error). The hook must not commit or roll back tx.
type SettleHook func(ctx context.Context, tx pgx.Tx, e *Effect) error

// settleHook returns the hook of owner (registered by a plugin, PluginHost.OnSettle), or nil. The
// hooks are fixed once NewClient returns.
func (c *Client) settleHook(owner string) SettleHook { return c.hooks[owner] }

// checkOwner returns ErrNoSettleHook when the effect is owned and its owner has no hook here.
func (c *Client) checkOwner(owner *string) error {
	if owner == nil || *owner == "" || c.settleHook(*owner) != nil {
		return nil
	}
	return fmt.Errorf("%w %q in this process: register it with a plugin (effects.OnSettle, Config.Plugins)", ErrNoSettleHook, *owner)
}

// runHook calls the owner's hook for an effect that has just been moved to state to in tx.
func (c *Client) runHook(ctx context.Context, tx pgx.Tx, e *Effect) error {
	if e.Owner == "" || !e.State.Settled() {
		return nil
	}
	hook := c.settleHook(e.Owner)
	if hook == nil {
		return fmt.Errorf("effects: %s of effect %s refused: %w %q in this process", e.State, e.ID, ErrNoSettleHook, e.Owner)
	}
	// A panicking hook is an error, which rolls the transition back like any other.
	if err := recovery.Do("hook", func() error { return hook(ctx, tx, e) }); err != nil {
		return fmt.Errorf("effects: settle hook of %q for effect %s (%s): %w", e.Owner, e.ID, e.State, err)
	}
	return nil
}

// ownerUnhooked logs and reports whether a worker must leave an owned effect alone because its
// owner has no hook in this process.
func (c *Client) ownerUnhooked(ctx context.Context, owner *string, effectID fmt.Stringer, worker string) bool {
	err := c.checkOwner(owner)
	if err == nil {
		return false
	}
	c.logger.ErrorContext(ctx, worker+": owner without a settle hook in this reactor; waiting",
		slog.String("owner", *owner), slog.String("effect_id", effectID.String()))
	return true
}
