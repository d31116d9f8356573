package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/fakebank"
	"github.com/reckonhq/reckon/internal/fakejobs"
	"github.com/reckonhq/reckon/internal/pgtest"
	"github.com/reckonhq/reckon/internal/proctest"
	"github.com/reckonhq/reckon/saga"
)

// asyncUpstream is a fake asynchronous upstream on 127.0.0.1 speaking the HTTP connector wire
// protocol: every dispatch is accepted (202 with the correlation id "{run}:{effect id}") and its
// outcome is reported later by the test, as the upstream's webhook would, over POST
// /v1/callbacks, signed with the callback secret the dispatch brought. Status checks are
// inconclusive: only the callback can tell.
type asyncUpstream struct {
	srv        *httptest.Server
	run        string
	mu         sync.Mutex
	dispatches map[string]int    // by Reckon-Effect-Id
	secrets    map[string]string // Reckon-Callback-Secret, by Reckon-Effect-Id
}

func newAsyncUpstream(t *testing.T, run string) *asyncUpstream {
	u := &asyncUpstream{run: run, dispatches: map[string]int{}, secrets: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Reckon-Effect-Id")
		u.mu.Lock()
		u.dispatches[id]++
		u.secrets[id] = r.Header.Get("Reckon-Callback-Secret")
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]string{"correlation_id": u.run + ":" + id})
	})
	mux.HandleFunc("POST /jobs/status", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"inconclusive"}`))
	})
	u.srv = httptest.NewServer(mux)
	t.Cleanup(u.srv.Close)
	return u
}

func (u *asyncUpstream) count(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.dispatches[id]
}

// signed is the headers of a callback for effect id with body, signed as the upstream would.
func (u *asyncUpstream) signed(id, body string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return []string{"Reckon-Effect-Id", id, "Reckon-Signature", fakejobs.Sign(u.secrets[id], time.Now(), []byte(body))}
}

// TestCallbackEndToEnd: server and reactor binaries, an HTTP connector in front of an upstream that
// accepts work and reports it later. An effect enqueued over HTTP into a run is dispatched once by
// the reactor, with its callback secret; the run's gate (GET /v1/runs/{id}) stays open until the
// upstream's callback, POST /v1/callbacks/{correlation_id} signed with that secret and no token,
// resolves it; then the run is settled with the result. Repeats are 200, other outcomes 409,
// another tenant's callback 404.
func TestCallbackEndToEnd(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	pool := pgtest.NewDB(t)
	env := []string{"DATABASE_URL=" + pool.Config().ConnString()}
	tokens := map[string]string{}
	for _, tenant := range []string{"acme", "globex"} {
		tokens[tenant] = tenantToken(t, env, server, tenant)
	}
	token := tokens["acme"]
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	up := newAsyncUpstream(t, "run-42")
	r := api.do("POST", "/v1/connectors", systemToken(t, env, server), `{"name":"jobs.async","tags":["write","external","network"],
		"dispatch_url":"`+up.srv.URL+`/jobs","status_url":"`+up.srv.URL+`/jobs/status","timeout_ms":1000,
		"status_check_limit":1000,"backoff_initial_ms":50,"backoff_max_ms":500}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)

	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms", "-in-flight-margin", "2s")
	reactor.Addr(t)

	r = api.do("POST", "/v1/effects", token, `{"connector":"jobs.async","idempotency_key":"report-1","run_id":"run-42","args":{"report":"q3"}}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	id := r.body["id"].(string)
	correlationID := "run-42:" + id

	// The dispatch's outcome is recorded: accepted (202) and awaiting the callback, PENDING with
	// the correlation id the upstream named. Only the callback can settle it.
	require.Eventually(t, func() bool {
		e := api.do("GET", "/v1/effects/"+id, token, "")
		state, _ := e.body["state"].(string)
		return state == "PENDING" && e.body["correlation_id"] == correlationID
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, up.count(id))
	run := api.do("GET", "/v1/runs/run-42", token, "")
	require.Equal(t, http.StatusOK, run.status, run.raw)
	require.Equal(t, false, run.body["settled"], "the gate is open: %s", run.raw)
	require.EqualValues(t, 1, run.body["unresolved"])
	require.Equal(t, http.StatusNotFound, api.do("GET", "/v1/runs/run-42", tokens["globex"], "").status)

	r = api.do("POST", "/v1/callbacks/"+correlationID, tokens["globex"], `{"result":{"pages":12}}`)
	require.Equal(t, http.StatusNotFound, r.status, "another tenant's effect: %s", r.raw)
	r = api.do("POST", "/v1/callbacks/"+correlationID, "", `{"result":{"pages":12}}`, up.signed(id, `{"result":{"pages":12}}`)...)
	require.Equal(t, http.StatusOK, r.status, "the upstream's signed callback: %s", r.raw)
	require.Equal(t, "CONFIRMED", r.body["state"])
	r = api.do("POST", "/v1/callbacks/"+correlationID, token, `{"result":{"pages":12}}`)
	require.Equal(t, http.StatusOK, r.status, "a repeated webhook delivery: %s", r.raw)
	r = api.do("POST", "/v1/callbacks/"+correlationID, token, `{"error":"printer on fire"}`)
	require.Equal(t, http.StatusConflict, r.status, r.raw)
	require.Equal(t, "callback_conflict", r.code())
	r = api.do("POST", "/v1/callbacks/run-42:"+uuid.NewString(), token, `{"result":{}}`)
	require.Equal(t, http.StatusNotFound, r.status)

	run = api.do("GET", "/v1/runs/run-42", token, "")
	require.Equal(t, true, run.body["settled"], run.raw)
	require.Equal(t, map[string]any{"CONFIRMED": float64(1)}, run.body["effects"])
	e := api.do("GET", "/v1/effects/"+id, token, "")
	require.Equal(t, map[string]any{"pages": float64(12)}, e.body["result"])
	require.Equal(t, 1, up.count(id), "dispatched once, never blindly again")

	stopBoth(t, srv, reactor)
}

// TestSagasEndToEnd: a saga definition stored over HTTP (and one with the CLI), two sagas
// started over HTTP before any reactor runs, then the reactor binary runs them against the fake
// bank behind an HTTP connector: one COMPLETED, one whose second step the bank rejects
// COMPENSATED, with the bank's ledger for it netting to zero.
func TestSagasEndToEnd(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	pool := pgtest.NewDB(t)
	env := []string{"DATABASE_URL=" + pool.Config().ConnString()}
	token, system := tenantToken(t, env, server, "acme"), systemToken(t, env, server)

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	bank := fakebank.New(t)
	base := bank.URL() + fakebank.ReckonPrefix
	r := api.do("POST", "/v1/connectors", system, `{"name":"bank.wire","tags":["write","external","network"],
		"dispatch_url":"`+base+`/wires","status_url":"`+base+`/wires/status","compensate_url":"`+base+`/wires/compensate",
		"timeout_ms":1000,"backoff_initial_ms":20,"backoff_max_ms":200}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	r = api.do("POST", "/v1/saga-definitions", system, `{"name":"transfer","steps":[
		{"name":"debit","connector":"bank.wire","undo":"connector"},
		{"name":"credit","connector":"bank.wire","undo":"none"}]}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)

	// The CLI: a bad definition is a usage error that stores nothing; a good one is stored once.
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return path
	}
	res := proctest.Run(t, env, server, "sagas", "define", "-f", write("bad.json", `{"name":"x","steps":[{"name":"a","connector":"nowhere","undo":"none"}]}`))
	require.Equal(t, 2, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, `"nowhere" is not registered`)
	good := write("audit.json", `{"name":"audit","steps":[{"name":"a","connector":"bank.wire","undo":"connector"}]}`)
	res = proctest.Run(t, env, server, "sagas", "define", "-f", good)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "stored")
	res = proctest.Run(t, env, server, "sagas", "define", "-f", good)
	require.Contains(t, res.Stdout, "unchanged")
	res = proctest.Run(t, env, server, "sagas", "list")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `audit\s+a\(bank.wire\)`, res.Stdout)
	require.Regexp(t, `transfer\s+debit\(bank.wire\) → credit\(bank.wire\)`, res.Stdout)

	r = api.do("POST", "/v1/sagas", token, `{"definition":"transfer","input":{"account":"a-1","amount":70},"start_key":"t-1"}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	ok := uuid.MustParse(r.body["id"].(string))
	r = api.do("POST", "/v1/sagas", token, `{"definition":"transfer","input":{"account":"a-1","amount":70},"start_key":"t-1"}`)
	require.Equal(t, http.StatusOK, r.status, "deduplicated by start_key: %s", r.raw)
	require.Equal(t, ok.String(), r.body["id"])
	r = api.do("POST", "/v1/sagas", token, `{"definition":"transfer","input":{"account":"a-2","amount":45}}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	failing := uuid.MustParse(r.body["id"].(string))
	bank.Script(saga.StepKey(failing, 1), fakebank.Reject) // the bank refuses its credit

	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms", "-in-flight-margin", "2s")
	reactor.Addr(t)

	await := func(id uuid.UUID) apiAnswer {
		var s apiAnswer
		require.Eventually(t, func() bool {
			s = api.do("GET", "/v1/sagas/"+id.String(), token, "")
			require.Equal(t, http.StatusOK, s.status, s.raw)
			state := s.body["state"]
			return state == "COMPLETED" || state == "COMPENSATED" || state == "STUCK"
		}, 60*time.Second, 50*time.Millisecond)
		return s
	}
	stepStates := func(s apiAnswer) []string {
		var out []string
		for _, st := range s.body["steps"].([]any) {
			out = append(out, st.(map[string]any)["state"].(string))
		}
		return out
	}
	done := await(ok)
	require.Equal(t, "COMPLETED", done.body["state"], done.raw)
	require.Equal(t, []string{"CONFIRMED", "CONFIRMED"}, stepStates(done))
	require.Equal(t, 1, bank.Count(saga.StepKey(ok, 0)))
	require.Equal(t, 1, bank.Count(saga.StepKey(ok, 1)))
	require.EqualValues(t, 70, bank.Net(saga.StepKey(ok, 0)))

	undone := await(failing)
	require.Equal(t, "COMPENSATED", undone.body["state"], undone.raw)
	require.Equal(t, []string{"COMPENSATED", "FAILED"}, stepStates(undone))
	require.Equal(t, 1, bank.Count(saga.StepKey(failing, 0)), "debited once")
	require.EqualValues(t, 0, bank.Net(saga.StepKey(failing, 0)), "and reversed: the ledger nets to zero")
	require.Zero(t, bank.Count(saga.StepKey(failing, 1)), "the refused credit performed nothing")

	list := api.do("GET", "/v1/sagas?state=COMPENSATED", token, "")
	require.Len(t, list.body["sagas"], 1)

	stopBoth(t, srv, reactor)
}
