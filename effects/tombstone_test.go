package effects_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// tombstone is a row of reckon_effect_tombstones, written the way retention writes one when it
// prunes a settled effect inside a dedup window.
type tombstone struct {
	tenant, key                    string
	effectID                       uuid.UUID
	state                          effects.State
	settledAt, prunedAt, expiresAt time.Time
}

// liveTombstone is the tombstone of a CONFIRMED effect of tenant's key, pruned an hour ago and
// keeping the key for another day. Times are whole microseconds, as Postgres stores them.
func liveTombstone(tenant, key string) tombstone {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return tombstone{
		tenant: tenant, key: key, effectID: uuid.Must(uuid.NewV7()), state: effects.StateConfirmed,
		settledAt: now.Add(-31 * 24 * time.Hour), prunedAt: now.Add(-time.Hour), expiresAt: now.Add(24 * time.Hour),
	}
}

func (h *harness) bury(ts tombstone) {
	h.t.Helper()
	_, err := h.pool.Exec(context.Background(), `INSERT INTO reckon_effect_tombstones
		(tenant_id, idempotency_key, effect_id, state, settled_at, pruned_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		ts.tenant, ts.key, ts.effectID, ts.state, ts.settledAt, ts.prunedAt, ts.expiresAt)
	require.NoError(h.t, err)
}

// requirePruned checks that err is the ErrPruned of ts.
func requirePruned(t *testing.T, err error, ts tombstone) {
	t.Helper()
	require.ErrorIs(t, err, effects.ErrPruned)
	require.NotErrorIs(t, err, effects.ErrIdempotencyConflict)
	var pruned *effects.PrunedError
	require.True(t, errors.As(err, &pruned), "%v", err)
	require.Equal(t, ts.key, pruned.IdempotencyKey)
	require.Equal(t, ts.effectID, pruned.EffectID)
	require.Equal(t, ts.state, pruned.State)
	require.True(t, ts.settledAt.Equal(pruned.SettledAt), "settled at %v, want %v", pruned.SettledAt, ts.settledAt)
	require.True(t, ts.prunedAt.Equal(pruned.PrunedAt), "pruned at %v, want %v", pruned.PrunedAt, ts.prunedAt)
	require.True(t, ts.expiresAt.Equal(pruned.ExpiresAt), "expires at %v, want %v", pruned.ExpiresAt, ts.expiresAt)
	require.ErrorContains(t, err, ts.effectID.String())
	require.ErrorContains(t, err, string(ts.state))
	require.ErrorContains(t, err, ts.prunedAt.Format(time.RFC3339))
}

// A late duplicate of a pruned effect, while its tombstone lives, is refused with ErrPruned by
// EnqueueTx, Enqueue and Do, and leaves nothing behind: no effect, no job, no call — even when the
// caller commits its transaction after the refusal.
func TestEnqueueOfPrunedKeyIsRefused(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	ctx := context.Background()
	ts := liveTombstone(effects.DefaultTenant, "w-1")
	ts.state = effects.StateFailed
	h.bury(ts)

	var txErr error
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		effect, err := h.client.EnqueueTx(ctx, tx, wireSpec("w-1", ""), nil)
		require.Nil(t, effect)
		txErr = err
		return nil // commit: the refusal wrote nothing for the commit to keep
	}))
	requirePruned(t, txErr, ts)

	_, err := h.client.Enqueue(ctx, wireSpec("w-1", ""), nil)
	requirePruned(t, err, ts)
	_, err = h.client.Do(ctx, wireSpec("w-1", ""))
	requirePruned(t, err, ts)
	// The key is refused whatever the args: the effect it names is gone, there is nothing to compare.
	_, err = h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "w-1", Args: map[string]any{"account": "acct-2", "amount": 99}}, nil)
	requirePruned(t, err, ts)

	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effect_transitions`))
	require.Zero(t, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch'`))
	require.Zero(t, h.bank.Calls("/wires"))

	// Other keys are enqueued and performed as usual.
	other := h.enqueue("bank.wire", "w-2", 10)
	require.Equal(t, effects.StateConfirmed, h.wait(other.ID).State)
	require.Equal(t, 1, h.bank.Count("w-2"))
}

// Once the dedup window ends the key is free: an enqueue records a new effect, which is performed.
func TestEnqueueAfterTombstoneExpired(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	ts := liveTombstone(effects.DefaultTenant, "w-1")
	ts.expiresAt = time.Now().Add(-time.Second)
	h.bury(ts)
	batched := liveTombstone(effects.DefaultTenant, "w-2")
	batched.expiresAt = time.Now().Add(-time.Second)
	h.bury(batched)

	effect := h.enqueue("bank.wire", "w-1", 10)
	require.False(t, effect.Deduplicated)
	require.NotEqual(t, ts.effectID, effect.ID)
	got := h.enqueueMany("bank.wire", "w-2", "w-3")
	require.Len(t, got, 2)
	for _, e := range append(got, effect) {
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
	}
	require.Equal(t, 1, h.bank.Count("w-1"))
	require.Equal(t, 1, h.bank.Count("w-2"))
}

// One tombstoned key fails the whole batch with the ErrPruned of the first such spec, and nothing
// of the batch is recorded.
func TestEnqueueBatchWithPrunedKey(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	first, second := liveTombstone(effects.DefaultTenant, "b-2"), liveTombstone(effects.DefaultTenant, "b-4")
	h.bury(first)
	h.bury(second)
	existing := h.enqueue("bank.wire", "b-0", 10)
	before := h.count(`SELECT count(*) FROM river_job`)

	for _, batch := range [][]string{
		{"b-0", "b-1", "b-2", "b-3"},        // an existing key, new keys, a tombstoned key
		{"b-1", "b-2", "b-3", "b-4", "b-2"}, // two tombstoned keys, one of them twice: the first is named
		{"b-2"},                             // alone: the single-row insert
		{"b-1", "b-2", "b-2", "b-3", "b-1"}, // repeated keys
		{"b-2", "b-4", "b-5", "b-6", "b-7"}, // tombstoned keys first
	} {
		specs := make([]effects.Spec, len(batch))
		for i, key := range batch {
			specs[i] = wireSpec(key, "")
		}
		_, err := h.client.EnqueueMany(ctx, specs, nil)
		requirePruned(t, err, first)
	}
	_, err := h.client.EnqueueMany(ctx, []effects.Spec{wireSpec("b-5", ""), wireSpec("b-4", ""), wireSpec("b-2", "")}, nil)
	requirePruned(t, err, second)

	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, before, h.count(`SELECT count(*) FROM river_job`))

	// Without the tombstoned keys the same batch goes through, and the existing key is deduplicated.
	got := h.enqueueMany("bank.wire", "b-0", "b-1", "b-3")
	require.True(t, got[0].Deduplicated)
	require.Equal(t, existing.ID, got[0].ID)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects`))
}

// Tombstones are per tenant, like idempotency keys: another tenant's tombstone of the same key does
// not block an enqueue.
func TestTombstoneIsPerTenant(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	ts := liveTombstone("acme", "k-1")
	h.bury(ts)

	mine, err := h.client.Enqueue(ctx, wireSpec("k-1", ""), nil)
	require.NoError(t, err)
	require.False(t, mine.Deduplicated)
	got := h.enqueueSpecs([]effects.Spec{wireSpec("k-2", ""), {TenantID: "initech", Connector: "bank.wire", IdempotencyKey: "k-1", Args: map[string]any{"amount": 1}}})
	require.Len(t, got, 2)

	acme := wireSpec("k-1", "")
	acme.TenantID = "acme"
	_, err = h.client.Enqueue(ctx, acme, nil)
	requirePruned(t, err, ts)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects WHERE tenant_id = 'acme'`))
}

// An effect that holds the key wins over a tombstone of it (which retention never leaves beside a
// live effect, but a dedup is the safe answer): the enqueue is deduplicated.
func TestExistingEffectWinsOverTombstone(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	existing := h.enqueue("bank.wire", "w-1", 10)
	h.bury(liveTombstone(effects.DefaultTenant, "w-1"))

	again := h.enqueue("bank.wire", "w-1", 10)
	require.True(t, again.Deduplicated)
	require.Equal(t, existing.ID, again.ID)
	got := h.enqueueMany("bank.wire", "w-1", "w-2")
	require.Equal(t, existing.ID, got[0].ID)
}

// A compensation whose key is tombstoned was performed and pruned: compensating again is ErrPruned,
// and nothing is called.
func TestCompensationOfPrunedKeyIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true})
	h.start()
	ctx := context.Background()
	original := h.enqueue("bank.wire", "w-1", 10)
	require.Equal(t, effects.StateConfirmed, h.wait(original.ID).State)
	ts := liveTombstone(effects.DefaultTenant, "w-1/compensate")
	h.bury(ts)

	_, err := h.client.Compensate(ctx, original.ID, "test", "undo", nil)
	requirePruned(t, err, ts)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch'`))
	require.Zero(t, h.bank.Calls("/wires/compensate"))

	// Another suffix is another key: that compensation is performed.
	undo, err := h.client.Compensate(ctx, original.ID, "test", "undo", &effects.CompensateOpts{KeySuffix: "2"})
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, h.wait(undo.ID).State)
	require.Equal(t, int64(0), h.bank.Net("w-1"))
}

// BenchmarkEnqueueTx measures one single-effect EnqueueTx per committed transaction, serially, with
// no reactor: the cost of the enqueue's statements (River's job insert, the effect insert and its
// live-tombstone probe). With tombstones the table holds that many live tombstones of other keys.
func BenchmarkEnqueueTx(b *testing.B) {
	for _, tombstones := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("tombstones=%d", tombstones), func(b *testing.B) {
			pool := pgtest.NewDB(b)
			registry := effects.NewRegistry()
			registry.MustRegister(fakebank.ConnectorOptions{BaseURL: "http://127.0.0.1:1", StatusCheck: true}.Connector())
			client := testkit.NewClient(b, pool, testkit.FastConfig(registry))
			ctx := context.Background()
			_, err := pool.Exec(ctx, `INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
				SELECT 'default', 'gone-' || i, gen_random_uuid(), 'CONFIRMED', now() - interval '40 days', now() + interval '1 day'
				FROM generate_series(1, $1::int) i`, tombstones)
			require.NoError(b, err)
			_, err = pool.Exec(ctx, `ANALYZE reckon_effect_tombstones`)
			require.NoError(b, err)
			n := 0
			for b.Loop() {
				n++
				require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := client.EnqueueTx(ctx, tx, wireSpec(fmt.Sprintf("bench-%d", n), ""), nil)
					return err
				}))
			}
		})
	}
}
