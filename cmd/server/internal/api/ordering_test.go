package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// orderingBody is the ordering part of an effect on the wire.
type orderingBody struct {
	ID          string `json:"id"`
	OrderingKey string `json:"ordering_key"`
	HeldBy      string `json:"held_by"`
}

// An effect enqueued with ordering_key waits for the one before it with the same key: GET names
// that one in held_by (the first has none); the key is per tenant; a bad key is a 400 naming the
// field, recording nothing.
func TestOrderingKeyOverHTTP(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	token := h.token("acme", false)
	enqueue := func(token, key string) orderingBody {
		r := h.do("POST", "/v1/effects", token, fmt.Sprintf(`{"connector":"bank.wire","idempotency_key":%q,"args":{"amount":5},"ordering_key":"order-42"}`, key))
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		body := decode[orderingBody](t, r)
		require.Equal(t, "order-42", body.OrderingKey)
		require.Empty(t, body.HeldBy, "held_by is in GET /v1/effects/{id} only")
		return body
	}
	get := func(token, id string) orderingBody {
		r := h.do("GET", "/v1/effects/"+id, token, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return decode[orderingBody](t, r)
	}
	first, second := enqueue(token, "o-1"), enqueue(token, "o-2")
	require.Empty(t, get(token, first.ID).HeldBy, "the first has the key's turn")
	require.Equal(t, first.ID, get(token, second.ID).HeldBy)

	other := h.token("globex", false)
	theirs := enqueue(other, "o-1")
	require.Empty(t, get(other, theirs.ID).HeldBy, "another tenant's key of the same name is another key")

	before := h.rows()
	for _, body := range []string{
		`{"connector":"bank.wire","idempotency_key":"o-3","ordering_key":"` + strings.Repeat("k", 513) + `"}`,
		`{"connector":"bank.wire","idempotency_key":"o-3","ordering_key":7}`,
	} {
		r := h.do("POST", "/v1/effects", token, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Equal(t, "invalid_request", r.errorCode(t))
		require.Contains(t, string(r.body), "ordering_key")
	}
	require.Equal(t, before, h.rows())
}
