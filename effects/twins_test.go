package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// GetTx reads in the caller's transaction: it sees an effect enqueued there before the commit,
// which Get does not, and an unknown id is ErrNotFound with the transaction still usable.
func TestGetTxSeesTheTransaction(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		e, err := h.client.EnqueueTx(ctx, tx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "k-1",
			Args: map[string]any{"account": "a", "amount": 1}}, nil)
		require.NoError(t, err)
		got, err := h.client.GetTx(ctx, tx, e.ID)
		require.NoError(t, err)
		require.Equal(t, e.ID, got.ID)
		require.Equal(t, effects.StatePending, got.State)
		_, err = h.client.Get(ctx, e.ID)
		require.ErrorIs(t, err, effects.ErrNotFound, "not committed yet")
		_, err = h.client.GetTx(ctx, tx, uuid.New())
		require.ErrorIs(t, err, effects.ErrNotFound)
		_, err = h.client.GetTx(ctx, tx, e.ID)
		return err // tx still usable
	}))
}

// EnqueueMany records every effect of the batch in one transaction, or none of them.
func TestEnqueueManyAllOrNothing(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	spec := func(connector, key string) effects.Spec {
		return effects.Spec{Connector: connector, IdempotencyKey: key, Args: map[string]any{"account": "a", "amount": 1}}
	}
	_, err := h.client.EnqueueMany(ctx, []effects.Spec{spec("bank.wire", "k-1"), spec("no.such", "k-2")}, nil)
	require.ErrorIs(t, err, effects.ErrUnknownConnector)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))

	batch, err := h.client.EnqueueMany(ctx, []effects.Spec{spec("bank.wire", "k-1"), spec("bank.wire", "k-2")}, nil)
	require.NoError(t, err)
	require.Len(t, batch, 2)
	require.Equal(t, "k-2", batch[1].IdempotencyKey)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects`))
}

// Resolve and Cancel take the same OperatorOpts as their Tx forms: another tenant's effect is
// ErrNotFound and is not touched.
func TestResolveAndCancelScopedToTenant(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	later := &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)}
	enqueue := func(key string) *effects.Effect {
		e, err := h.client.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "bank.wire", IdempotencyKey: key,
			Args: map[string]any{"account": "a", "amount": 1}}, later)
		require.NoError(t, err)
		return e
	}
	pending, stuck := enqueue("k-1"), enqueue("k-2")
	for _, state := range []string{"UNKNOWN", "STUCK"} {
		_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'setup' WHERE id = $1`, stuck.ID, state)
		require.NoError(t, err)
	}

	other := &effects.OperatorOpts{TenantID: "globex"}
	decision := effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "bank statement"}
	_, err := h.client.Resolve(ctx, stuck.ID, decision, other)
	require.ErrorIs(t, err, effects.ErrNotFound)
	_, err = h.client.Cancel(ctx, pending.ID, "alice", "withdrawn", other)
	require.ErrorIs(t, err, effects.ErrNotFound)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'STUCK'`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'PENDING'`))

	own := &effects.OperatorOpts{TenantID: "acme"}
	resolved, err := h.client.Resolve(ctx, stuck.ID, decision, own)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, resolved.State)
	cancelled, err := h.client.Cancel(ctx, pending.ID, "alice", "withdrawn", nil) // nil: any tenant
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, cancelled.State)
	_, err = h.client.Resolve(ctx, stuck.ID, decision, nil)
	require.ErrorIs(t, err, effects.ErrNotStuck, "a decision already recorded")
}

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

// Compensate is CompensateTx in a transaction of its own: the compensation of a CONFIRMED effect,
// the same one again on a retry, and ErrNotCompensatable for an effect that is not CONFIRMED.
func TestCompensateInItsOwnTransaction(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{Compensate: true})
	ctx := context.Background()
	later := &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)}
	e, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "k-1",
		Args: map[string]any{"account": "a", "amount": 5}}, later)
	require.NoError(t, err)
	_, err = h.client.Compensate(ctx, e.ID, "alice", "refund", nil)
	require.ErrorIs(t, err, effects.ErrNotCompensatable, "still PENDING")
	_, err = h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'setup' WHERE id = $1`, e.ID)
	require.NoError(t, err)

	compensation, err := h.client.Compensate(ctx, e.ID, "alice", "refund", &effects.CompensateOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, "k-1/compensate", compensation.IdempotencyKey)
	require.Equal(t, effects.StatePending, compensation.State)
	again, err := h.client.Compensate(ctx, e.ID, "alice", "refund", nil)
	require.NoError(t, err)
	require.True(t, again.Deduplicated)
	require.Equal(t, compensation.ID, again.ID)
	_, err = h.client.Compensate(ctx, e.ID, "alice", "refund", &effects.CompensateOpts{KeySuffix: "2", Owner: "nobody"})
	require.ErrorIs(t, err, effects.ErrNoSettleHook)
}
