package effects

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// SettleHook is told, inside the transaction that writes it, that an effect of its owner has
// become CONFIRMED, FAILED or STUCK. It may write in tx (enqueue the next effect of a saga, update
// its own tables); an error rolls the whole transition back, so the effect stays where it was and
// the writer tries again later (a dispatch or reconcile job is retried; an operator's Resolve
// returns the error). The hook must not commit or roll back tx.
type SettleHook func(ctx context.Context, tx pgx.Tx, e *Effect) error

// OnSettle registers hook for the effects whose Spec.Owner is owner. Register before Start and
// before enqueueing owned effects: an owned effect whose owner has no hook in this process is
// refused — its enqueue returns ErrNoSettleHook, a reactor leaves it untouched (snoozes its job)
// and any other write that would settle it fails — so an owner is never silently skipped.
// Registering again for the same owner replaces the hook. An empty owner or a nil hook is a
// programming error and panics, as registering a nil http.Handler does.
//
// Owned effects never go through group commit: their outcome is written in a transaction of its
// own, in which the hook runs.
func (c *Client) OnSettle(owner string, hook SettleHook) {
	if owner == "" || hook == nil {
		panic("effects: OnSettle needs an owner and a hook")
	}
	c.hooksMu.Lock()
	defer c.hooksMu.Unlock()
	if c.hooks == nil {
		c.hooks = map[string]SettleHook{}
	}
	c.hooks[owner] = hook
}

// settleHook returns the hook of owner, or nil.
func (c *Client) settleHook(owner string) SettleHook {
	c.hooksMu.RLock()
	defer c.hooksMu.RUnlock()
	return c.hooks[owner]
}

// checkOwner returns ErrNoSettleHook when the effect is owned and its owner has no hook here.
func (c *Client) checkOwner(owner *string) error {
	if owner == nil || *owner == "" || c.settleHook(*owner) != nil {
		return nil
	}
	return fmt.Errorf("%w %q in this process: register it with Client.OnSettle", ErrNoSettleHook, *owner)
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
	if err := safeHook(ctx, tx, e, hook); err != nil {
		return fmt.Errorf("effects: settle hook of %q for effect %s (%s): %w", e.Owner, e.ID, e.State, err)
	}
	return nil
}

// safeHook turns a panicking hook into an error, which rolls the transition back like any other.
func safeHook(ctx context.Context, tx pgx.Tx, e *Effect, hook SettleHook) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hook panicked: %v", r)
		}
	}()
	return hook(ctx, tx, e)
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
