package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakejobs"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// setupRunning is an API server whose effects client dispatches once the caller has registered
// its connectors in the returned registry and started it (testkit.Start), with a fake async
// upstream for those connectors to call.
func setupRunning(t *testing.T) (*harness, *effects.Registry, *fakejobs.Upstream) {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t)}
	registry := effects.NewRegistry()
	h.client = testkit.NewClient(t, h.pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler),
		FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond})
	h.server = h.serve(&api.Config{Pool: h.pool, Effects: h.client})
	return h, registry, fakejobs.New(t)
}

// setupAsync is setupRunning with "jobs.run", a connector of the fake async upstream: its effects
// are accepted and await a callback.
func setupAsync(t *testing.T) (*harness, *fakejobs.Upstream) {
	t.Helper()
	h, registry, up := setupRunning(t)
	require.NoError(t, registry.Register(fakejobs.ConnectorOptions{
		BaseURL: up.URL(), CallbackURL: "http://127.0.0.1:1/unused", AsyncTimeout: time.Hour, Timeout: 2 * time.Second,
	}.Connector()))
	testkit.Start(t, h.client)
	return h, up
}

// accepted enqueues a job over the API into run and waits until the upstream accepted it.
func (h *harness) accepted(token, key, run string) effectBody {
	h.t.Helper()
	r := h.do("POST", "/v1/effects", token, `{"connector":"jobs.run","idempotency_key":"`+key+`","run_id":"`+run+`","args":{"job":"`+key+`"}}`)
	require.Equal(h.t, http.StatusCreated, r.status, "%s", r.body)
	id := r.effect(h.t).ID
	var e effectBody
	require.Eventually(h.t, func() bool {
		r := h.do("GET", "/v1/effects/"+id.String(), token, "")
		e = r.effect(h.t)
		return e.CorrelationID != ""
	}, 20*time.Second, 20*time.Millisecond, "effect %s never accepted", id)
	require.Equal(h.t, "PENDING", e.State)
	return e
}

type runBody struct {
	ID         string         `json:"id"`
	Steps      int            `json:"steps"`
	Failures   int            `json:"failures"`
	Effects    map[string]int `json:"effects"`
	Unresolved int            `json:"unresolved"`
	Settled    bool           `json:"settled"`
}

func (h *harness) run(token, id string) (int, runBody) {
	h.t.Helper()
	r := h.do("GET", "/v1/runs/"+url.PathEscape(id), token, "")
	var body runBody
	if r.status == http.StatusOK {
		require.NoError(h.t, json.Unmarshal(r.body, &body))
	}
	return r.status, body
}

// TestCallbacks: POST /v1/callbacks/{correlation_id} resolves the caller's accepted effects: 200
// for a result or an error and for a repeat, 409 for another outcome and for a STUCK effect, 404
// for an unknown id and for another tenant's effect (which stays as it was), 400 for bad bodies.
// GET /v1/runs/{id} shows the gate open while an effect awaits its callback and settled after.
func TestCallbacks(t *testing.T) {
	t.Parallel()
	h, _ := setupAsync(t)
	acme, globex := h.token("acme", false), h.token("globex", false)

	ok := h.accepted(acme, "job-ok", "run-1")
	bad := h.accepted(acme, "job-bad", "run-1")
	require.Equal(t, "run-1:"+ok.ID.String(), ok.CorrelationID, "the self-routing id")
	status, run := h.run(acme, "run-1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 2, run.Unresolved)
	require.False(t, run.Settled)
	require.Equal(t, map[string]int{"PENDING": 2}, run.Effects)
	status, _ = h.run(globex, "run-1")
	require.Equal(t, http.StatusNotFound, status, "another tenant's run")
	status, _ = h.run(acme, "no-such-run")
	require.Equal(t, http.StatusNotFound, status)

	// Bad bodies and ids change nothing.
	before := h.rows()
	for _, body := range []string{``, `{`, `{}`, `{"result":{},"error":"x"}`, `{"error":""}`, `{"error":7}`, `{"result":{},"extra":1}`, `[1]`} {
		r := h.do("POST", "/v1/callbacks/"+ok.CorrelationID, acme, body)
		require.Equal(t, http.StatusBadRequest, r.status, "body %q: %s", body, r.body)
	}
	for _, id := range []string{"run-1:" + uuid.NewString(), "nonsense", "other-run:" + ok.ID.String()} {
		r := h.do("POST", "/v1/callbacks/"+url.PathEscape(id), acme, `{"result":{}}`)
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", id, r.body)
		require.Equal(t, "not_found", r.errorCode(t))
	}
	r := h.do("POST", "/v1/callbacks/"+ok.CorrelationID, globex, `{"result":{"stolen":true}}`)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's effect is invisible")
	r = h.do("POST", "/v1/callbacks/"+ok.CorrelationID, "", `{"result":{}}`)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, before, h.rows())
	require.Equal(t, "PENDING", h.state(ok.ID))

	// Success, repeated (with an Idempotency-Key replayed too), then a conflicting report.
	r = h.do("POST", "/v1/callbacks/"+ok.CorrelationID, acme, `{"result":{"rows":3}}`, "Idempotency-Key", "cb-1")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "CONFIRMED", r.effect(t).State)
	r = h.do("POST", "/v1/callbacks/"+ok.CorrelationID, acme, `{"result":{ "rows": 3 }}`)
	require.Equal(t, http.StatusOK, r.status, "a repeated delivery: %s", r.body)
	r = h.do("POST", "/v1/callbacks/"+ok.CorrelationID, acme, `{"result":{"rows":4}}`)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "callback_conflict", r.errorCode(t))
	r = h.do("POST", "/v1/callbacks/"+ok.CorrelationID, acme, `{"error":"disk full"}`)
	require.Equal(t, http.StatusConflict, r.status)
	stored := h.do("GET", "/v1/effects/"+ok.ID.String(), acme, "")
	require.JSONEq(t, `{"rows":3}`, string(mustField(t, stored.body, "result")))

	// Failure.
	r = h.do("POST", "/v1/callbacks/"+bad.CorrelationID, acme, `{"error":"quota exceeded"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "FAILED", r.effect(t).State)

	status, run = h.run(acme, "run-1")
	require.Equal(t, http.StatusOK, status)
	require.True(t, run.Settled)
	require.Equal(t, map[string]int{"CONFIRMED": 1, "FAILED": 1}, run.Effects)
	require.Equal(t, 1, run.Failures)
	require.Equal(t, 2, run.Steps)

	// A STUCK effect: 409, the operator decides.
	stuck := h.accepted(acme, "job-stuck", "run-2")
	h.makeStuck(stuck.ID)
	r = h.do("POST", "/v1/callbacks/"+stuck.CorrelationID, acme, `{"result":{}}`)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "effect_stuck", r.errorCode(t))
	require.Equal(t, "STUCK", h.state(stuck.ID))
}

func mustField(t *testing.T, body []byte, name string) json.RawMessage {
	t.Helper()
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &fields))
	require.Contains(t, fields, name)
	return fields[name]
}
