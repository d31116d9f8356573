package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// TestEffectsCLIShowsOrdering: `effects show` prints an ordered effect's ordering key and the
// effect that holds it back (held_by in JSON); the one that has the key's turn shows none.
func TestEffectsCLIShowsOrdering(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	head, next := uuid.New(), uuid.New()
	for _, e := range []struct {
		id           uuid.UUID
		key          string
		seq          int
		queue, order *string
	}{
		{head, "wire-a", 1, new("default"), new("default")},
		{next, "wire-b", 2, nil, new("default")},
	} {
		_, err := pool.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, ordering_key,
			order_seq, queue, order_queue, transition_actor, transition_reason)
			VALUES ($1, 'acme', 'bank.wire', $2, 'idempotent', 'order-7', $3, $4, $5, 'test', 'seeded')`, e.id, e.key, e.seq, e.queue, e.order)
		require.NoError(t, err)
	}
	code, out, errOut := runEffectsCLI(t, pool, "show", next.String())
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `ordering key\s+order-7`, out)
	require.Regexp(t, `held by\s+`+head.String()+` \(bank.wire, PENDING\)`, out)

	code, out, errOut = runEffectsCLI(t, pool, "show", next.String(), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var evidence struct {
		Effect struct {
			OrderingKey string    `json:"ordering_key"`
			HeldBy      uuid.UUID `json:"held_by"`
		} `json:"effect"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &evidence))
	require.Equal(t, "order-7", evidence.Effect.OrderingKey)
	require.Equal(t, head, evidence.Effect.HeldBy)

	code, out, errOut = runEffectsCLI(t, pool, "show", head.String())
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `ordering key\s+order-7`, out)
	require.NotContains(t, out, "held by")
}
