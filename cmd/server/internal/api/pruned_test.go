package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestEnqueueOfPrunedKey: POST /v1/effects with the idempotency key of an effect that retention
// pruned, while its tombstone keeps the key, is 409 effect_pruned naming the effect, its final
// state and when it was pruned, and writes nothing (not even the stored answer of an
// Idempotency-Key header). The key is the tenant's only: another tenant enqueues it, and once the
// window has ended the tenant does too.
func TestEnqueueOfPrunedKey(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	acme, initech := h.token("acme", false), h.token("initech", false)
	effectID := uuid.New()
	prunedAt := time.Date(2026, 10, 2, 3, 4, 5, 0, time.UTC)
	_, err := h.pool.Exec(ctx, `INSERT INTO reckon_effect_tombstones
		(tenant_id, idempotency_key, effect_id, state, settled_at, pruned_at, expires_at)
		VALUES ('acme', 'w-1', $1, 'CONFIRMED', $2, $3, now() + interval '1 day'), ('acme', 'w-2', $4, 'FAILED', $2, $3, now() - interval '1 second')`,
		effectID, prunedAt.Add(-30*24*time.Hour), prunedAt, uuid.New())
	require.NoError(t, err)
	before := h.rows()

	body := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"account":"a-1","amount":10}}`
	r := h.do("POST", "/v1/effects", acme, body, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "effect_pruned", r.errorCode(t))
	var answer struct{ Error struct{ Message string } }
	require.NoError(t, json.Unmarshal(r.body, &answer))
	require.Contains(t, answer.Error.Message, effectID.String())
	require.Contains(t, answer.Error.Message, "CONFIRMED")
	require.Contains(t, answer.Error.Message, "pruned at 2026-10-02T03:04:05Z")
	require.Contains(t, answer.Error.Message, "nothing was enqueued")
	require.Equal(t, before, h.rows())

	// Another tenant's key of the same name is free.
	other := h.enqueue(initech, "w-1", 10)
	require.Equal(t, "initech", other.TenantID)
	// An expired tombstone keeps nothing: the key is enqueued anew.
	renewed := h.enqueue(acme, "w-2", 10)
	require.Equal(t, "w-2", renewed.IdempotencyKey)
	require.Equal(t, before["effects"]+2, h.rows()["effects"])
}
