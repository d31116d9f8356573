package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// TestOperatorTxScopedToTenant: ResolveTx and CancelTx with OperatorOpts.TenantID treat another
// tenant's effect as missing and leave it untouched; the owner's own call succeeds, and what it
// does exists only once its transaction commits.
func TestOperatorTxScopedToTenant(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	later := &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)}
	pending, err := h.client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "bank.wire", IdempotencyKey: "k-1",
		Args: map[string]any{"account": "a", "amount": 1}}, later)
	require.NoError(t, err)
	stuck, err := h.client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "bank.wire", IdempotencyKey: "k-2",
		Args: map[string]any{"account": "a", "amount": 2}}, later)
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'UNKNOWN', transition_actor = 'test', transition_reason = 'setup' WHERE id = $1`, stuck.ID)
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'STUCK', transition_actor = 'test', transition_reason = 'setup' WHERE id = $1`, stuck.ID)
	require.NoError(t, err)
	transitions := h.count(`SELECT count(*) FROM reckon_effect_transitions`)

	other := &effects.OperatorOpts{TenantID: "globex"}
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.ResolveTx(ctx, tx, stuck.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "mallory", Reason: "not mine"}, other)
		return err
	})
	require.ErrorIs(t, err, effects.ErrNotFound)
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.CancelTx(ctx, tx, pending.ID, "mallory", "not mine", other)
		return err
	})
	require.ErrorIs(t, err, effects.ErrNotFound)
	require.Equal(t, transitions, h.count(`SELECT count(*) FROM reckon_effect_transitions`), "nothing recorded")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'STUCK'`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'PENDING'`))

	// The owner's actions, rolled back: nothing happens.
	own := &effects.OperatorOpts{TenantID: "acme"}
	tx, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	resolved, err := h.client.ResolveTx(ctx, tx, stuck.ID, effects.Resolution{To: effects.StateFailed, Actor: "alice", Reason: "bank says no"}, own)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, resolved.State)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'STUCK'`))

	// And committed.
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		if _, err := h.client.ResolveTx(ctx, tx, stuck.ID, effects.Resolution{To: effects.StateFailed, Actor: "alice", Reason: "bank says no"}, own); err != nil {
			return err
		}
		_, err := h.client.CancelTx(ctx, tx, pending.ID, "alice", "withdrawn", own)
		return err
	}))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'FAILED'`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE state = 'cancelled'`))
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK", "STUCK>FAILED"}, h.path(stuck.ID))
}
