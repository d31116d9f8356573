package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// wireDedup registers bank.dedup: the bank's wire connector with a compensation, whose business
// key (the args' "order") deduplicates (Connector.DedupByBusinessKey).
func (h *harness) wireDedup() {
	h.t.Helper()
	c := fakebank.ConnectorOptions{Name: "bank.dedup", BaseURL: h.bank.URL(), StatusCheck: true, Compensate: true}.Connector()
	c.DedupByBusinessKey = true
	c.BusinessKey = func(args json.RawMessage) (string, error) {
		var a struct {
			Order string `json:"order"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Order == "" {
			return "", errors.New("no order")
		}
		return a.Order, nil
	}
	require.NoError(h.t, h.registry.Register(c))
}

// dedupSpec is a spec of bank.dedup for order (its business key) with the idempotency key key.
func dedupSpec(key, order string, amount int) effects.Spec {
	return effects.Spec{Connector: "bank.dedup", IdempotencyKey: key,
		Args: map[string]any{"account": "acct-1", "amount": amount, "order": order}}
}

// setState moves an effect to state by raw SQL, as an outcome would.
func (h *harness) setState(id uuid.UUID, state effects.State) {
	h.t.Helper()
	_, err := h.pool.Exec(context.Background(), `UPDATE reckon_effects SET state = $2::text::reckon_effect_state, error = CASE WHEN $2::text = 'FAILED' THEN 'rejected' END,
		transition_actor = 'test', transition_reason = 'test' WHERE id = $1`, id, string(state))
	require.NoError(h.t, err)
}

// A second effect with the business key of one that is not FAILED is that effect, replayed (as an
// idempotency-key replay), or ErrBusinessKeyConflict with other args; a FAILED one does not hold
// the key; tenants, connectors without dedup and effects without a business key are independent.
func TestBusinessKeyDedupReplayConflictAndFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setupWired(t)
	h.wireDedup()

	first, err := h.client.Enqueue(ctx, dedupSpec("k-1", "order-1", 10), nil)
	require.NoError(t, err)
	require.False(t, first.Deduplicated)
	require.Equal(t, "order-1", first.BusinessKey)

	replay, err := h.client.Enqueue(ctx, dedupSpec("k-2", "order-1", 10), nil)
	require.NoError(t, err)
	require.True(t, replay.Deduplicated, "the earlier effect, replayed")
	require.Equal(t, first.ID, replay.ID)
	require.Equal(t, "k-1", replay.IdempotencyKey)

	_, err = h.client.Enqueue(ctx, dedupSpec("k-3", "order-1", 11), nil)
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE business_key = 'order-1'`))

	// The business key given in the spec counts as the connector's does.
	explicit := dedupSpec("k-4", "order-x", 10)
	explicit.BusinessKey = "order-1"
	again, err := h.client.Enqueue(ctx, explicit, nil)
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict, "other args (order-x) under the key: %v", again)

	// Another tenant holds its own business keys.
	other := dedupSpec("k-1", "order-1", 10)
	other.TenantID = "acme"
	theirs, err := h.client.Enqueue(ctx, other, nil)
	require.NoError(t, err)
	require.False(t, theirs.Deduplicated)
	require.NotEqual(t, first.ID, theirs.ID)

	// A connector that does not dedup keeps today's behaviour: its business key is only a label.
	for _, key := range []string{"w-1", "w-2"} {
		e, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: key, BusinessKey: "order-1",
			Args: map[string]any{"account": "acct-1", "amount": 10}}, nil)
		require.NoError(t, err)
		require.False(t, e.Deduplicated)
	}

	// Once the holder is FAILED, the key is free: a new effect is made, and it holds the key.
	h.setState(first.ID, effects.StateFailed)
	fresh, err := h.client.Enqueue(ctx, dedupSpec("k-5", "order-1", 12), nil)
	require.NoError(t, err)
	require.False(t, fresh.Deduplicated)
	require.NotEqual(t, first.ID, fresh.ID)
	replay, err = h.client.Enqueue(ctx, dedupSpec("k-6", "order-1", 12), nil)
	require.NoError(t, err)
	require.Equal(t, fresh.ID, replay.ID)
	require.True(t, replay.Deduplicated)

	// A CONFIRMED holder still holds it.
	h.setState(fresh.ID, effects.StateConfirmed)
	_, err = h.client.Enqueue(ctx, dedupSpec("k-7", "order-1", 13), nil)
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict)

	// The idempotency key still comes first: k-1's effect, though FAILED, is k-1's replay.
	byKey, err := h.client.Enqueue(ctx, dedupSpec("k-1", "order-1", 10), nil)
	require.NoError(t, err)
	require.Equal(t, first.ID, byKey.ID)
}

// A compensation has its original's business key and does not dedup against it.
func TestBusinessKeyDedupCompensation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t)
	h.wireDedup()

	original, err := h.client.Enqueue(ctx, dedupSpec("c-1", "order-1", 10), nil)
	require.NoError(t, err)
	h.setState(original.ID, effects.StateConfirmed)
	compensation, err := h.client.Compensate(ctx, original.ID, "operator:alice", "refund", nil)
	require.NoError(t, err)
	require.False(t, compensation.Deduplicated)
	require.NotEqual(t, original.ID, compensation.ID)
	require.Equal(t, "order-1", compensation.BusinessKey)
	require.NotNil(t, compensation.CompensatesID)

	// The original still holds the key.
	replay, err := h.client.Enqueue(ctx, dedupSpec("c-2", "order-1", 10), nil)
	require.NoError(t, err)
	require.Equal(t, original.ID, replay.ID)
}

// In one batch, a second spec with the business key of an earlier one gets the earlier one's
// effect (as for a repeated idempotency key), or the batch fails with ErrBusinessKeyConflict; a
// spec whose key an existing effect holds gets that effect, and its dispatch job is not left.
func TestBusinessKeyDedupBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t)
	h.wireDedup()

	out := h.enqueueSpecs([]effects.Spec{dedupSpec("b-1", "order-1", 10), dedupSpec("b-2", "order-1", 10), dedupSpec("b-3", "order-2", 10)})
	require.Len(t, out, 3)
	holder := out[0].ID
	require.Equal(t, holder, out[1].ID)
	require.NotEqual(t, out[0].ID, out[2].ID)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects`))

	_, err := h.client.EnqueueMany(ctx, []effects.Spec{dedupSpec("b-4", "order-3", 10), dedupSpec("b-5", "order-3", 11)}, nil)
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects`), "the batch failed as a whole")

	// Against an effect already recorded (order-1), with one new (order-4): one insert of effects
	// and their dispatch jobs.
	out, err = h.client.EnqueueMany(ctx, []effects.Spec{dedupSpec("b-6", "order-1", 10), dedupSpec("b-7", "order-4", 10)}, nil)
	require.NoError(t, err)
	require.Equal(t, holder, out[0].ID)
	require.True(t, out[0].Deduplicated)
	require.Equal(t, "b-1", out[0].IdempotencyKey)
	require.False(t, out[1].Deduplicated)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job j WHERE NOT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.job_id = j.id)`),
		"no dispatch job without an effect")

	_, err = h.client.EnqueueMany(ctx, []effects.Spec{dedupSpec("b-8", "order-5", 10), dedupSpec("b-9", "order-1", 99)}, nil)
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects`))
}

// The database decides under concurrent enqueues: 20 enqueues of one business key with different
// idempotency keys make one effect; the others are its replays with the same args, and
// ErrBusinessKeyConflict with other args.
func TestBusinessKeyDedupConcurrent(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wireDedup()

	run := func(order string, amount func(i int) int) ([]*effects.Effect, []error) {
		const n = 20
		results, errs := make([]*effects.Effect, n), make([]error, n)
		testkit.AtOnce(n, func(i int) {
			results[i], errs[i] = h.client.Enqueue(context.Background(), dedupSpec(fmt.Sprintf("%s-%d", order, i), order, amount(i)), nil)
		})
		return results, errs
	}

	results, errs := run("same", func(int) int { return 10 })
	var made uuid.UUID
	replays := 0
	for i, err := range errs {
		require.NoError(t, err)
		if results[i].Deduplicated {
			replays++
		} else {
			require.Equal(t, uuid.Nil, made, "one effect made")
			made = results[i].ID
		}
	}
	require.NotEqual(t, uuid.Nil, made)
	require.Equal(t, 19, replays)
	for _, e := range results {
		require.Equal(t, made, e.ID)
	}
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE business_key = 'same'`))

	results, errs = run("differ", func(i int) int { return 10 + i })
	made, conflicts := uuid.Nil, 0
	for i, err := range errs {
		if errors.Is(err, effects.ErrBusinessKeyConflict) {
			conflicts++
			continue
		}
		require.NoError(t, err)
		require.False(t, results[i].Deduplicated)
		require.Equal(t, uuid.Nil, made, "one effect made")
		made = results[i].ID
	}
	require.NotEqual(t, uuid.Nil, made)
	require.Equal(t, 19, conflicts)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE business_key = 'differ'`))
}

// A FAILED effect whose business key a newer effect holds is not redriven: two live effects would
// hold one key. Once the newer one FAILED too, the redrive goes through.
func TestRedriveRefusesTakenBusinessKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t)
	h.wireDedup()

	old, err := h.client.Enqueue(ctx, dedupSpec("r-1", "order-1", 10), nil)
	require.NoError(t, err)
	h.setState(old.ID, effects.StateFailed)
	newer, err := h.client.Enqueue(ctx, dedupSpec("r-2", "order-1", 10), nil)
	require.NoError(t, err)
	require.False(t, newer.Deduplicated)

	_, err = h.client.Redrive(ctx, old.ID, "alice", "outage over", nil)
	require.ErrorIs(t, err, effects.ErrRedriveBusinessKeyTaken)
	require.Equal(t, effects.StateFailed, h.state(old.ID), "nothing changed")
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(old.ID))

	h.setState(newer.ID, effects.StateFailed)
	redriven, err := h.client.Redrive(ctx, old.ID, "alice", "outage over", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, redriven.State)
	_, err = h.client.Enqueue(ctx, dedupSpec("r-3", "order-1", 11), nil)
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict, "the redriven effect holds the key again")
}

// Do (an inline call) with the business key of an effect that is not FAILED returns that effect
// and calls nothing.
func TestBusinessKeyDedupInlineDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t)
	h.wireDedup()

	first, err := h.client.Enqueue(ctx, dedupSpec("d-1", "order-1", 10), nil)
	require.NoError(t, err)
	got, err := h.client.Do(ctx, dedupSpec("d-2", "order-1", 10))
	require.NoError(t, err)
	require.Equal(t, first.ID, got.ID)
	require.True(t, got.Deduplicated)
	_, err = h.client.Do(ctx, dedupSpec("d-3", "order-1", 11))
	require.ErrorIs(t, err, effects.ErrBusinessKeyConflict)
	require.Zero(t, h.bank.Count("d-2")+h.bank.Count("d-3"), "nothing called")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
}
