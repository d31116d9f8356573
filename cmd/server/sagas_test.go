package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/fakejobs"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
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
	server, _, env := serverOnDB(t)
	tokens := tenantTokens(t, env, server, "acme", "globex")
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
// defineTransfer registers, with the system token, the HTTP connector bank.wire on a new fake bank
// (with a status check and a compensation) and the saga definition transfer: debit (undone by the
// connector's compensation), then credit (no undo). It returns the bank.
func defineTransfer(t *testing.T, api apiClient, system string) *fakebank.Bank {
	t.Helper()
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
	return bank
}

func TestSagasEndToEnd(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	token, system := tenantToken(t, env, server, "acme"), systemToken(t, env, server)

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	bank := defineTransfer(t, api, system)

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
	res = proctest.Run(t, env, server, "sagas", "definitions")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `audit\s+a\(bank.wire\)`, res.Stdout)
	require.Regexp(t, `transfer\s+debit\(bank.wire\) → credit\(bank.wire\)`, res.Stdout)

	r := api.do("POST", "/v1/sagas", token, `{"definition":"transfer","input":{"account":"a-1","amount":70},"start_key":"t-1"}`)
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

	// The server counts the sagas it started: two (the deduplicated start is not one).
	_, scrape := get(t, api.base+"/metrics")
	require.Contains(t, scrape, `reckon_saga_started_total{name="transfer"} 2`)

	list := api.do("GET", "/v1/sagas?state=COMPENSATED", token, "")
	require.Len(t, list.body["sagas"], 1)

	stopBoth(t, srv, reactor)
}

// opsFixture is a database with the HTTP connector bank.wire, the stored saga definition transfer
// and clients (never started) that start sagas and runs in it, for the operator commands' tests.
type opsFixture struct {
	pool    *pgxpool.Pool
	env     []string
	effects *effects.Client
	sagas   *saga.Client
}

func newOpsFixture(t *testing.T) *opsFixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	_, _, err := httpconn.Put(ctx, pool, httpconn.Definition{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, DispatchURL: "http://127.0.0.1:1/wires",
		StatusURL: "http://127.0.0.1:1/wires/status", CompensateURL: "http://127.0.0.1:1/wires/compensate",
	})
	require.NoError(t, err)
	registry := effects.NewRegistry()
	_, err = new(httpconn.Syncer).Sync(ctx, pool, registry)
	require.NoError(t, err)
	def, err := sagadef.Parse([]byte(`{"name":"transfer","steps":[
		{"name":"debit","connector":"bank.wire","undo":"connector"},
		{"name":"credit","connector":"bank.wire","undo":"none"}]}`))
	require.NoError(t, err)
	_, _, err = sagadef.Put(ctx, pool, def, registry)
	require.NoError(t, err)
	var sagaDefs sagadef.Syncer
	sagas, err := saga.NewClient(pool, &saga.Config{OnUnknownDefinition: sagaDefs.Load})
	require.NoError(t, err)
	config := testkit.FastConfig(registry)
	config.Plugins = []effects.Plugin{sagas}
	client := testkit.NewClient(t, pool, config)
	return &opsFixture{pool: pool, env: []string{"DATABASE_URL=" + pool.Config().ConnString()}, effects: client, sagas: sagas}
}

// TestSagasCLI drives `server sagas list|show|resolve` through the binary: a table and JSON of the
// sagas of every tenant, filtered and paged with the cursor it prints; a saga's steps, compensation
// order and history; a resolution recorded with the OS user's actor or -actor; bad flags and
// out-of-range values exit 2 naming the flag with nothing changed, an unknown saga exits 1.
func TestSagasCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := proctest.Binary(t, "server")
	f := newOpsFixture(t)
	var ids []uuid.UUID // oldest first
	for _, tenant := range []string{"acme", "globex", "acme"} {
		s, err := f.sagas.Start(ctx, "transfer", map[string]any{"amount": 70}, &saga.StartOpts{TenantID: tenant})
		require.NoError(t, err)
		ids = append(ids, s.ID)
	}
	stuck := ids[0]
	_, err := f.pool.Exec(ctx, `UPDATE reckon_saga_steps SET state = 'COMPENSATION_STUCK' WHERE saga_id = $1`, stuck)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_sagas SET state = 'STUCK', stuck_reason = 'the bank refused the refund' WHERE id = $1`, stuck)
	require.NoError(t, err)

	requireSagaListCLI(t, f, server, ids)
	requireSagaShowCLI(t, f, server, stuck)
	requireSagaCLIMistakes(t, f, server, stuck)
	s, err := f.sagas.Get(ctx, stuck)
	require.NoError(t, err)
	require.Equal(t, saga.StateStuck, s.State, "nothing changed")

	res := proctest.Run(t, f.env, server, "sagas", "show", uuid.NewString())
	require.Equal(t, 1, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, "not found")
	res = proctest.Run(t, f.env, server, "sagas", "resolve", ids[1].String(), "-decision", "mark_compensated", "-reason", "by hand")
	require.Equal(t, 1, res.ExitCode, "a RUNNING saga: %s", res.Stderr)
	require.Contains(t, res.Stderr, "not STUCK")

	res = proctest.Run(t, f.env, server, "sagas", "resolve", stuck.String(), "-decision", "mark_compensated", "-reason", "refunded by hand")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "resolved (mark_compensated) by "+cliActor()+": now COMPENSATED")
	history, err := f.sagas.History(ctx, stuck)
	require.NoError(t, err)
	require.Equal(t, "operator:"+cliActor(), history[len(history)-1].Actor)

	// -actor names someone else; the second saga is held by nothing stuck: refused.
	_, err = f.pool.Exec(ctx, `UPDATE reckon_saga_steps SET state = 'COMPENSATION_STUCK' WHERE saga_id = $1`, ids[2])
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_sagas SET state = 'STUCK' WHERE id = $1`, ids[2])
	require.NoError(t, err)
	res = proctest.Run(t, f.env, server, "sagas", "resolve", ids[2].String(), "-decision", "mark_compensated", "-reason", "done at the bank",
		"-actor", "ann@example.com", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, `"state": "COMPENSATED"`)
	history, err = f.sagas.History(ctx, ids[2])
	require.NoError(t, err)
	require.Equal(t, "operator:ann@example.com", history[len(history)-1].Actor)
}

// requireSagaListCLI: `sagas list` prints the sagas (ids, oldest first; the first STUCK) of every
// tenant as a table, and as JSON in the API's shape, paged with the cursor it prints and filtered.
func requireSagaListCLI(t *testing.T, f *opsFixture, server string, ids []uuid.UUID) {
	t.Helper()
	stuck := ids[0]
	res := proctest.Run(t, f.env, server, "sagas", "list")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	require.Len(t, lines, 4, res.Stdout)
	require.Equal(t, []string{"ID", "TENANT", "NAME", "STATE", "STEP", "CREATED", "UPDATED"}, strings.Fields(lines[0]))
	require.Equal(t, []string{ids[2].String(), "acme", "transfer", "RUNNING", "1/2"}, strings.Fields(lines[1])[:5])
	require.Equal(t, []string{stuck.String(), "acme", "transfer", "STUCK", "1/2"}, strings.Fields(lines[3])[:5])

	type page struct {
		Sagas []struct {
			ID         uuid.UUID                      `json:"id"`
			TenantID   string                         `json:"tenant_id"`
			Definition string                         `json:"definition"`
			State      string                         `json:"state"`
			Steps      []struct{ Name, State string } `json:"steps"`
		} `json:"sagas"`
		Next string `json:"next_cursor"`
	}
	var p page
	res = proctest.Run(t, f.env, server, "sagas", "list", "-limit", "2", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &p), res.Stdout)
	require.Len(t, p.Sagas, 2)
	require.Equal(t, ids[2], p.Sagas[0].ID)
	require.Equal(t, "debit", p.Sagas[0].Steps[0].Name)
	require.Equal(t, "transfer", p.Sagas[0].Definition, "the API's shape")
	require.NotEmpty(t, p.Next)
	res = proctest.Run(t, f.env, server, "sagas", "list", "-limit", "2", "-after", p.Next, "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	p = page{}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &p), res.Stdout)
	require.Len(t, p.Sagas, 1)
	require.Equal(t, stuck, p.Sagas[0].ID)
	require.Empty(t, p.Next)
	res = proctest.Run(t, f.env, server, "sagas", "list", "-tenant", "acme", "-state", "stuck", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	p = page{}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &p), res.Stdout)
	require.Len(t, p.Sagas, 1)
	require.Equal(t, "STUCK", p.Sagas[0].State)
}

// requireSagaShowCLI: `sagas show` prints the STUCK saga's steps, compensation order and history,
// as a table and as JSON.
func requireSagaShowCLI(t *testing.T, f *opsFixture, server string, stuck uuid.UUID) {
	t.Helper()
	res := proctest.Run(t, f.env, server, "sagas", "show", stuck.String())
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "saga "+stuck.String()+" (transfer) of tenant acme: STUCK")
	require.Contains(t, res.Stdout, "stuck: the bank refused the refund")
	require.Regexp(t, `(?m)^0\s+debit\s+COMPENSATION_STUCK\s`, res.Stdout)
	require.Contains(t, res.Stdout, "compensation order: 0 (debit)")
	require.Regexp(t, `(?m)^\S+\s+-\s+RUNNING\s+0\s+saga\s+saga started`, res.Stdout)
	res = proctest.Run(t, f.env, server, "sagas", "show", stuck.String(), "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var detail struct {
		Saga struct {
			ID      uuid.UUID                    `json:"id"`
			History []struct{ To, Actor string } `json:"history"`
		} `json:"saga"`
		CompensationOrder []int `json:"compensation_order"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &detail), res.Stdout)
	require.Equal(t, stuck, detail.Saga.ID)
	require.Equal(t, []int{0}, detail.CompensationOrder)
	require.Len(t, detail.Saga.History, 1)
}

// requireSagaCLIMistakes: bad flags and out-of-range values exit 2 naming the flag (or the ID)
// before anything changes.
func requireSagaCLIMistakes(t *testing.T, f *opsFixture, server string, stuck uuid.UUID) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-limit", "0"}, "-limit"},
		{[]string{"list", "-limit", "501"}, "-limit"},
		{[]string{"list", "-state", "LOST"}, "-state"},
		{[]string{"list", "-tenant", "not a tenant"}, "-tenant"},
		{[]string{"list", "-after", "garbage"}, "-after"},
		{[]string{"list", "-o", "yaml"}, "-o"},
		{[]string{"list", "-json"}, "-json"},
		{[]string{"show"}, "needs an ID"},
		{[]string{"show", "not-a-uuid"}, "ID"},
		{[]string{"resolve", stuck.String(), "-reason", "by hand"}, "-decision"},
		{[]string{"resolve", stuck.String(), "-decision", "undo", "-reason", "by hand"}, "-decision"},
		{[]string{"resolve", stuck.String(), "-decision", "mark_compensated"}, "-reason"},
		{[]string{"resolve", stuck.String(), "-decision", "mark_compensated", "-reason", strings.Repeat("x", 1001)}, "-reason"},
		{[]string{"resolve", stuck.String(), "-decision", "mark_compensated", "-reason", "by hand", "-actor", "a\xffb"}, "-actor"},
		{[]string{"frobnicate"}, "unknown sagas action"},
	} {
		res := proctest.Run(t, f.env, server, append([]string{"sagas"}, tc.args...)...)
		require.Equal(t, 2, res.ExitCode, "%v: %s", tc.args, res.Stderr)
		require.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}
}
