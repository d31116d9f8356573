package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakejobs"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// asyncEndpoints are the endpoints of an HTTP connector for a job that finishes later: dispatch
// answers 202 Accepted, status checks are inconclusive (the job still runs), /cancel abandons the
// job (200) and /cancel-refused cannot (409, too late). It counts the cancel calls per effect.
type asyncEndpoints struct {
	*httptest.Server
	mu      sync.Mutex
	cancels map[uuid.UUID]int
}

func newAsyncEndpoints(t *testing.T) *asyncEndpoints {
	e := &asyncEndpoints{cancels: map[uuid.UUID]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/dispatch":
			w.WriteHeader(http.StatusAccepted)
		case "/status":
			_, _ = io.WriteString(w, `{"status":"inconclusive"}`)
		case "/cancel", "/cancel-refused":
			e.mu.Lock()
			e.cancels[uuid.MustParse(r.Header.Get(httpconn.HeaderEffectID))]++
			e.mu.Unlock()
			if r.URL.Path == "/cancel-refused" {
				w.WriteHeader(http.StatusConflict)
			}
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *asyncEndpoints) cancelled(id uuid.UUID) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cancels[id]
}

// setupHTTPAsync is an API server whose effects client runs (dispatches) with no connector of its
// own and an async timeout of 45s: the HTTP connectors stored over the API are its only ones.
func setupHTTPAsync(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t)}
	h.client = testkit.NewClient(t, h.pool, &effects.Config{
		Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler), AsyncTimeout: 45 * time.Second,
		FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond,
	})
	testkit.Start(t, h.client)
	h.server = h.serve(&api.Config{Pool: h.pool, Effects: h.client})
	return h
}

// awaitedEffect is what the async tests read of an effect.
type awaitedEffect struct {
	State      string     `json:"state"`
	Error      string     `json:"error"`
	DeadlineAt *time.Time `json:"deadline_at"`
	History    []struct {
		Reason string    `json:"reason"`
		At     time.Time `json:"at"`
	} `json:"history"`
}

// awaitTime waits until the effect's dispatch was accepted upstream and returns how long it awaits
// its callback: its deadline minus the time the acceptance was recorded.
func (h *harness) awaitTime(token string, id uuid.UUID) time.Duration {
	h.t.Helper()
	var await time.Duration
	require.Eventually(h.t, func() bool {
		var e awaitedEffect
		require.NoError(h.t, json.Unmarshal(h.do("GET", "/v1/effects/"+id.String(), token, "").body, &e))
		for _, tr := range e.History {
			if tr.Reason == "accepted upstream: awaiting callback" && e.DeadlineAt != nil {
				await = e.DeadlineAt.Sub(tr.At)
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "effect %s never accepted", id)
	return await
}

// TestAsyncTimeoutsOverHTTP: an HTTP connector stored over the API with async_timeout_ms,
// hard_timeout and cancel_url, and effects enqueued over the API with async_timeout_ms and
// async_hard_timeout, get exactly those deadlines and hard timeouts: the effect's own timeout wins
// over its connector's, which wins over the reactor's (here 45s, not the 10m default); a hard
// timeout calls the cancel URL — FAILED when the upstream abandons the job, UNKNOWN when it
// refuses.
func TestAsyncTimeoutsOverHTTP(t *testing.T) {
	t.Parallel()
	h := setupHTTPAsync(t)
	up := newAsyncEndpoints(t)
	system, user := h.systemToken(), h.token("acme", false)
	connector := func(name, extra string) string {
		return `{"name":"` + name + `","tags":["write","idempotent"],"dispatch_url":"` + up.URL + `/dispatch",` +
			`"status_url":"` + up.URL + `/status","timeout_ms":2000` + extra + `}`
	}
	for _, def := range []string{
		connector("jobs.long", `,"async_timeout_ms":60000,"cancel_url":"`+up.URL+`/cancel"`),
		connector("jobs.plain", ``),
		connector("jobs.hard", `,"async_timeout_ms":300,"hard_timeout":true,"cancel_url":"`+up.URL+`/cancel-refused"`),
	} {
		r := h.do("POST", "/v1/connectors", system, def)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	}
	r := h.do("GET", "/v1/connectors/jobs.long", user, "")
	require.Equal(t, http.StatusOK, r.status)
	var long map[string]any
	require.NoError(t, json.Unmarshal(r.body, &long))
	require.EqualValues(t, 60000, long["async_timeout_ms"])
	require.Equal(t, up.URL+"/cancel", long["cancel_url"])
	require.NotContains(t, long, "hard_timeout", "soft unless said")
	r = h.do("GET", "/v1/connectors/jobs.plain", user, "")
	require.NotContains(t, string(r.body), "async_timeout_ms", "none of its own: the reactor's")

	enqueue := func(connector, key, extra string) uuid.UUID {
		r := h.do("POST", "/v1/effects", user, `{"connector":"`+connector+`","idempotency_key":"`+key+`","args":{}`+extra+`}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		return r.effect(t).ID
	}
	connectorTimeout := enqueue("jobs.long", "connector-timeout", ``)
	effectHard := enqueue("jobs.long", "effect-hard", `,"async_timeout_ms":300,"async_hard_timeout":true`)
	reactorTimeout := enqueue("jobs.plain", "reactor-timeout", ``)
	effectTimeout := enqueue("jobs.plain", "effect-timeout", `,"async_timeout_ms":120000`)
	connectorHard := enqueue("jobs.hard", "connector-hard", ``)

	within := func(want, got time.Duration, what string) {
		t.Helper()
		require.InDelta(t, want.Seconds(), got.Seconds(), 1, "%s: awaits %v, want %v", what, got, want)
	}
	within(60*time.Second, h.awaitTime(user, connectorTimeout), "the connector's async_timeout_ms")
	within(45*time.Second, h.awaitTime(user, reactorTimeout), "the reactor's AsyncTimeout")
	within(120*time.Second, h.awaitTime(user, effectTimeout), "the effect's async_timeout_ms over the reactor's")
	within(300*time.Millisecond, h.awaitTime(user, effectHard), "the effect's async_timeout_ms over the connector's")
	within(300*time.Millisecond, h.awaitTime(user, connectorHard), "the connector's async_timeout_ms over the reactor's")

	settled := func(id uuid.UUID) awaitedEffect {
		t.Helper()
		var e awaitedEffect
		require.Eventually(t, func() bool {
			require.NoError(t, json.Unmarshal(h.do("GET", "/v1/effects/"+id.String(), user, "").body, &e))
			return e.State != "PENDING"
		}, 20*time.Second, 20*time.Millisecond, "effect %s still awaits its callback", id)
		return e
	}
	e := settled(effectHard)
	require.Equal(t, "FAILED", e.State, "the effect's hard timeout cancelled the job upstream")
	require.Equal(t, "hard timeout: cancelled upstream", e.Error)
	require.Equal(t, 1, up.cancelled(effectHard))
	e = settled(connectorHard)
	require.Equal(t, "UNKNOWN", e.State, "the connector's hard timeout, refused upstream: outcome unknown")
	require.Contains(t, e.Error, "hard timeout: the upstream could not be cancelled")
	require.Contains(t, e.Error, "409")
	require.Equal(t, 1, up.cancelled(connectorHard))

	for _, id := range []uuid.UUID{connectorTimeout, reactorTimeout, effectTimeout} {
		require.Equal(t, "PENDING", h.state(id), "still awaiting its callback")
		require.Zero(t, up.cancelled(id))
	}
}

// TestAsyncTimeoutBadInputs: out-of-range and mistyped async settings of an effect or an HTTP
// connector are a 400 naming the field, and nothing is written; 7 days, effects' bound, is
// accepted.
func TestAsyncTimeoutBadInputs(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	system, user := h.systemToken(), h.token("acme", false)
	before := h.rows()
	effect := func(extra string) string {
		return `{"connector":"bank.wire","idempotency_key":"k","args":{}` + extra + `}`
	}
	connector := func(extra string) string {
		return `{"name":"jobs.run","tags":["write","idempotent"],"dispatch_url":"http://127.0.0.1:1/d"` + extra + `}`
	}
	for _, tc := range []struct {
		name, path, body, code, field string
	}{
		{"effect: zero", "/v1/effects", effect(`,"async_timeout_ms":0`), "invalid_request", "async_timeout_ms"},
		{"effect: negative", "/v1/effects", effect(`,"async_timeout_ms":-1`), "invalid_request", "async_timeout_ms"},
		{"effect: over 7 days", "/v1/effects", effect(`,"async_timeout_ms":604800001`), "invalid_request", "async_timeout_ms"},
		{"effect: beyond int64", "/v1/effects", effect(`,"async_timeout_ms":1e30`), "invalid_request", "async_timeout_ms"},
		{"effect: fraction", "/v1/effects", effect(`,"async_timeout_ms":1.5`), "invalid_request", "async_timeout_ms"},
		{"effect: a duration string", "/v1/effects", effect(`,"async_timeout_ms":"10s"`), "invalid_request", "async_timeout_ms"},
		{"effect: hard timeout not a boolean", "/v1/effects", effect(`,"async_hard_timeout":"yes"`), "invalid_request", "async_hard_timeout"},
		{"effect: a connector's field", "/v1/effects", effect(`,"cancel_url":"http://127.0.0.1:1/c"`), "invalid_request", "cancel_url"},
		{"connector: zero", "/v1/connectors", connector(`,"async_timeout_ms":0`), "invalid_connector", "async_timeout_ms"},
		{"connector: negative", "/v1/connectors", connector(`,"async_timeout_ms":-5`), "invalid_connector", "async_timeout_ms"},
		{"connector: over 7 days", "/v1/connectors", connector(`,"async_timeout_ms":604800001`), "invalid_connector", "async_timeout_ms"},
		{"connector: beyond int64", "/v1/connectors", connector(`,"async_timeout_ms":1e30`), "invalid_connector", "async_timeout_ms"},
		{"connector: a duration string", "/v1/connectors", connector(`,"async_timeout_ms":"1m"`), "invalid_connector", "async_timeout_ms"},
		{"connector: hard timeout not a boolean", "/v1/connectors", connector(`,"hard_timeout":1`), "invalid_connector", "hard_timeout"},
		{"connector: cancel URL not a string", "/v1/connectors", connector(`,"cancel_url":7`), "invalid_connector", "cancel_url"},
		{"connector: relative cancel URL", "/v1/connectors", connector(`,"cancel_url":"/cancel"`), "invalid_connector", "cancel_url"},
		{"connector: ftp cancel URL", "/v1/connectors", connector(`,"cancel_url":"ftp://jobs/cancel"`), "invalid_connector", "cancel_url"},
		{"connector: an effect's field", "/v1/connectors", connector(`,"async_hard_timeout":true`), "invalid_connector", "async_hard_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := user
			if tc.path == "/v1/connectors" {
				token = system
			}
			r := h.do("POST", tc.path, token, tc.body)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			require.Equal(t, tc.code, r.errorCode(t))
			require.Contains(t, string(r.body), tc.field, "the message names the field")
		})
	}
	require.Equal(t, before, h.rows(), "nothing written")

	// The bound itself is accepted by both, all the way to Postgres.
	r := h.do("POST", "/v1/connectors", system, connector(`,"async_timeout_ms":604800000,"hard_timeout":true,"cancel_url":"http://127.0.0.1:1/c"`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("POST", "/v1/effects", user, effect(`,"async_timeout_ms":604800000,"async_hard_timeout":true`))
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var stored struct {
		TimeoutMS *int32
		Hard      bool
	}
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT async_timeout_ms, async_hard_timeout FROM reckon_effects WHERE id = $1`, r.effect(t).ID).Scan(&stored.TimeoutMS, &stored.Hard))
	require.NotNil(t, stored.TimeoutMS)
	require.EqualValues(t, 604800000, *stored.TimeoutMS)
	require.True(t, stored.Hard)
}

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
