package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIdempotencyKeyExpiresAtItsTTL: a stored response is replayed while its key is younger than
// the TTL (24h by default); once older — its row not purged yet — the key is free: the request runs
// again (the effect deduplicates), its new response is stored and replayed in turn, and a
// different request may now use the key.
func TestIdempotencyKeyExpiresAtItsTTL(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	token := h.token("acme", false)
	body := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"amount":1}}`
	other := `{"connector":"bank.wire","idempotency_key":"w-2","args":{"amount":2}}`
	age := func(by string) {
		t.Helper()
		_, err := h.pool.Exec(ctx, `UPDATE reckon_idempotency_keys SET created_at = created_at - $1::interval WHERE key = 'k'`, by)
		require.NoError(t, err)
	}

	require.Equal(t, http.StatusCreated, h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k").status)
	age("23 hours")
	r := h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "younger than the TTL: replayed")
	require.Equal(t, http.StatusUnprocessableEntity, h.do("POST", "/v1/effects", token, other, "Idempotency-Key", "k").status)

	age("2 hours")
	r = h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusOK, r.status, "past the TTL: run again, and the effect deduplicates")
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	r = h.do("POST", "/v1/effects", token, body, "Idempotency-Key", "k")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "the new response is the one replayed")

	age("25 hours")
	r = h.do("POST", "/v1/effects", token, other, "Idempotency-Key", "k")
	require.Equal(t, http.StatusCreated, r.status, "an expired key may carry another request")
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.Equal(t, 2, h.rows()["effects"])
	var keys int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_idempotency_keys`).Scan(&keys))
	require.Equal(t, 1, keys, "one row per key, claimed afresh")
}
