package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// TestConnectorsAndDispatch: a system token defines an HTTP connector over the API (an unsafe
// definition is refused and nothing is stored); effects enqueued over the API with it are
// dispatched by a reactor to the fake bank and end CONFIRMED, visible over the API; a connector
// stored by another process is found on first use; a connector with unresolved effects cannot be
// deleted, and a deleted one cannot be used.
func TestConnectorsAndDispatch(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	system, user := h.systemToken(), h.token("acme", false)
	base := h.bank.URL() + fakebank.ReckonPrefix

	unsafe := `{"name":"bank.http","tags":["write"],"dispatch_url":"` + base + `/wires"}`
	r := h.do("POST", "/v1/connectors", system, unsafe)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, "invalid_connector", r.errorCode(t))
	r = h.do("POST", "/v1/connectors", system, `{"name":"bank.http","dispatch_url":"`+base+`/wires","status":"x"}`)
	require.Equal(t, http.StatusBadRequest, r.status, "a misspelt field is refused")
	require.Zero(t, h.rows()["connectors"])

	def := `{"name":"bank.http","tags":["write","external","network"],"dispatch_url":"` + base + `/wires","status_url":"` + base + `/wires/status","timeout_ms":2000,"backoff_initial_ms":20}`
	r = h.do("POST", "/v1/connectors", system, def)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("POST", "/v1/connectors", system, def)
	require.Equal(t, http.StatusOK, r.status, "replaced")
	r = h.do("GET", "/v1/connectors", user, "")
	require.Equal(t, http.StatusOK, r.status)
	var list struct{ Connectors []httpconn.Definition }
	require.NoError(t, json.Unmarshal(r.body, &list))
	require.Len(t, list.Connectors, 1)
	require.Equal(t, 2*time.Second, list.Connectors[0].Timeout)
	r = h.do("GET", "/v1/connectors/bank.http", user, "")
	require.Equal(t, http.StatusOK, r.status)
	r = h.do("GET", "/v1/connectors/bank.none", user, "")
	require.Equal(t, http.StatusNotFound, r.status)

	// Enqueued over the API, before any reactor runs.
	r = h.do("POST", "/v1/effects", user, `{"connector":"bank.http","idempotency_key":"w-1","args":{"account":"a-1","amount":10}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	wire := r.effect(t)
	var got effectBody
	require.NoError(t, json.Unmarshal(h.do("GET", "/v1/effects/"+wire.ID.String(), user, "").body, &got))
	require.Equal(t, "PENDING", got.State)
	r = h.do("DELETE", "/v1/connectors/bank.http", system, "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "connector_in_use", r.errorCode(t))

	// Stored by another process: found on first use.
	_, _, err := httpconn.Put(ctx, h.pool, httpconn.Definition{
		Name: "bank.other", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, DispatchURL: base + "/wires",
	})
	require.NoError(t, err)
	r = h.do("POST", "/v1/effects", user, `{"connector":"bank.other","idempotency_key":"o-1","args":{"account":"a-1","amount":1}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, "idempotent", gjsonString(t, r.body, "policy"))

	// A connector whose business key is made of args: args without the field are the caller's
	// mistake (400, nothing written), not the server's (it was 500).
	_, _, err = httpconn.Put(ctx, h.pool, httpconn.Definition{
		Name: "bank.keyed", Tags: []effects.Tag{effects.TagWrite}, DispatchURL: base + "/wires", BusinessKeyFields: []string{"account"},
	})
	require.NoError(t, err)
	for _, args := range []string{`{"amount":1}`, `{"account":null}`, `{"account":{"id":1}}`} {
		before := h.rows()
		r = h.do("POST", "/v1/effects", user, `{"connector":"bank.keyed","idempotency_key":"k-1","args":`+args+`}`)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", args, r.body)
		require.Equal(t, "invalid_request", r.errorCode(t))
		require.Contains(t, string(r.body), "business key")
		require.Equal(t, before, h.rows())
	}
	r = h.do("POST", "/v1/effects", user, `{"connector":"bank.keyed","idempotency_key":"k-1","args":{"account":"a-9"}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, "a-9", gjsonString(t, r.body, "business_key"))

	// A reactor dispatches what the API enqueued.
	registry := effects.NewRegistry()
	_, err = new(httpconn.Syncer).Sync(ctx, h.pool, registry)
	require.NoError(t, err)
	reactor, err := effects.NewClient(h.pool, &effects.Config{
		Registry: registry, Logger: slog.New(slog.DiscardHandler), FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, reactor.Start(ctx))
	t.Cleanup(func() { require.NoError(t, reactor.Stop(context.Background())) })
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = reactor.Wait(waitCtx, wire.ID)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(h.do("GET", "/v1/effects/"+wire.ID.String(), user, "").body, &got))
	require.Equal(t, "CONFIRMED", got.State)
	require.Equal(t, 1, h.bank.Count("w-1"), "the bank performed the wire once")

	// Deleted: gone for the API too.
	r = h.do("DELETE", "/v1/connectors/bank.http", user, "")
	require.Equal(t, http.StatusForbidden, r.status)
	r = h.do("DELETE", "/v1/connectors/bank.http", system, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = h.do("GET", "/v1/connectors/bank.http", user, "")
	require.Equal(t, http.StatusNotFound, r.status)
	r = h.do("POST", "/v1/effects", user, `{"connector":"bank.http","idempotency_key":"w-2","args":{"account":"a-1","amount":10}}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Equal(t, "unknown_connector", r.errorCode(t))
}

func gjsonString(t *testing.T, body []byte, field string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	s, _ := m[field].(string)
	return s
}
