package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// A stored connector with dedup_by_business_key: POST /v1/effects with the business key of an
// effect that is not FAILED answers that effect as a replay (200, deduplicated, as a repeated
// idempotency key does), or 409 business_key_conflict with other args, recording nothing; the
// field is stored and answered; a FAILED effect whose key a newer one holds is not redriven (409
// business_key_taken).
func TestBusinessKeyDedupOverHTTP(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	system, token := h.systemToken(), h.token("acme", false)
	base := h.bank.URL() + fakebank.ReckonPrefix

	def := `{"name":"bank.dedup","tags":["write","external","network"],"dispatch_url":"` + base + `/wires","status_url":"` + base +
		`/wires/status","business_key_fields":["order"],"dedup_by_business_key":true}`
	r := h.do("POST", "/v1/connectors", system, def)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("GET", "/v1/connectors/bank.dedup", token, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	stored := decode[httpconn.Definition](t, r)
	require.True(t, stored.DedupByBusinessKey)

	enqueue := func(key string, amount int) response {
		return h.do("POST", "/v1/effects", token, fmt.Sprintf(`{"connector":"bank.dedup","idempotency_key":%q,"args":{"account":"a-1","amount":%d,"order":"o-1"}}`, key, amount))
	}
	r = enqueue("k-1", 10)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	first := r.effect(t)
	require.Equal(t, "o-1", gjsonString(t, r.body, "business_key"))

	r = enqueue("k-2", 10)
	require.Equal(t, http.StatusOK, r.status, "a replay: %s", r.body)
	require.Equal(t, first.ID, r.effect(t).ID)
	require.Equal(t, "k-1", r.effect(t).IdempotencyKey)
	require.True(t, *r.effect(t).Deduplicated)

	before := h.rows()
	r = enqueue("k-3", 11)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "business_key_conflict", r.errorCode(t))
	require.Equal(t, before, h.rows(), "nothing recorded")

	// FAILED, the key is free: a new effect holds it, and the old one is not redriven.
	_, err := h.pool.Exec(context.Background(), `UPDATE reckon_effects SET state = 'FAILED', error = 'rejected',
		transition_actor = 'test', transition_reason = 'rejected' WHERE id = $1`, first.ID)
	require.NoError(t, err)
	r = enqueue("k-4", 12)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.NotEqual(t, first.ID, r.effect(t).ID)
	before = h.rows()
	r = h.do("POST", "/v1/effects/"+first.ID.String()+"/redrive", token, `{"reason":"outage over"}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "business_key_taken", r.errorCode(t))
	require.Equal(t, before, h.rows(), "refusals change nothing")
	require.Equal(t, "FAILED", h.state(first.ID))
}
