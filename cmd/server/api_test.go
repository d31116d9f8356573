package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

type apiClient struct {
	t    *testing.T
	base string
}

type apiAnswer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a apiAnswer) code() string {
	e, _ := a.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// startServer runs the server binary on env's database, and returns its API's client and the
// process once it is listening.
func startServer(t *testing.T, env []string, server string) (apiClient, *proctest.Process) {
	t.Helper()
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	return apiClient{t: t, base: "http://" + srv.Addr(t)}, srv
}

// startFastReactor runs a reactor on env's database with the tests' short timings (flags added to
// them), once it is listening.
func startFastReactor(t *testing.T, env []string, flags ...string) *proctest.Process {
	t.Helper()
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), append([]string{"-addr", "127.0.0.1:0",
		"-connector-sync-interval", "200ms", "-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms"}, flags...)...)
	reactor.Addr(t)
	return reactor
}

// putConnector stores the connector definition (JSON) with the system token, and requires it
// created.
func (c apiClient) putConnector(system, definition string) apiAnswer {
	c.t.Helper()
	r := c.do("POST", "/v1/connectors", system, definition)
	require.Equal(c.t, http.StatusCreated, r.status, r.raw)
	return r
}

// putConnectorFor stores the connector definition (JSON) with the system token, requires it
// created, and waits until reactor has loaded it: a reactor that meets a connector it has not
// synced yet snoozes the job for 30s.
func (c apiClient) putConnectorFor(reactor *proctest.Process, system, definition string) {
	c.t.Helper()
	c.putConnector(system, definition)
	require.Eventually(c.t, func() bool { return reactor.Logged("http connector added") }, 30*time.Second, 20*time.Millisecond)
}

// bankWire is the definition of the demo.bank.wire connector of the fake bank.
func bankWire(bank *fakebank.Bank) string {
	bankURL := bank.URL() + fakebank.ReckonPrefix
	return `{"name":"demo.bank.wire","tags":["write","external","network"],"dispatch_url":"` + bankURL + `/wires",
		"status_url":"` + bankURL + `/wires/status","timeout_ms":1000,"max_attempts":3}`
}

func (c apiClient) do(method, path, token, body string, headers ...string) apiAnswer {
	c.t.Helper()
	resp, raw := testkit.Do(c.t, method, c.base+path, token, body, headers...)
	answer := apiAnswer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	require.NoError(c.t, json.Unmarshal(raw, &answer.body), "%s %s answered non-JSON: %s", method, path, raw)
	return answer
}

// TestAPIThroughBinaries drives the real server binary on loopback: tenants and tokens made with
// the CLI (a token is printed once and stored hashed), a connector defined over the API with a
// system token (a tenant's admin token is refused; the change is audited; a revoked system token
// is refused), effects
// enqueued, replayed by Idempotency-Key (422 with another body), kept from another tenant (404 for
// read, list, resolve and cancel), resolved from STUCK and cancelled from PENDING; revoked and
// missing tokens and oversized bodies are refused and change nothing. SIGTERM stops the server.
func TestAPIThroughBinaries(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	ctx := context.Background()
	count := func(sql string, args ...any) int { return testkit.Count(t, pool, sql, args...) }

	tokens := createTokensCLI(t, env, server, count)
	admin, tokenA, system, systemID := tokens.admin, tokens.a, tokens.system, tokens.systemID

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0", "-max-body-bytes", "4096")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	bank := fakebank.New(t)
	base := bank.URL() + fakebank.ReckonPrefix
	connector := `{"name":"bank.wire","tags":["write","external","network"],"dispatch_url":"` + base + `/wires","status_url":"` + base + `/wires/status"}`
	r := api.do("POST", "/v1/connectors", admin, connector)
	require.Equal(t, http.StatusForbidden, r.status, "connectors are every tenant's: not for a tenant's admin: %s", r.raw)
	require.Equal(t, "forbidden", r.code())
	r = api.do("POST", "/v1/connectors", system, connector)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	require.Equal(t, 1, count(`SELECT count(*) FROM reckon_definition_changes
		WHERE kind = 'connector' AND name = 'bank.wire' AND action = 'create' AND actor = 'api:platform' AND token_id = $1`, systemID))
	r = api.do("GET", "/v1/effects", system, "")
	require.Equal(t, http.StatusForbidden, r.status, "a system token has no tenant: %s", r.raw)
	res := proctest.Run(t, env, server, "tokens", "revoke", systemID)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "revoked token "+systemID+": a system token")
	r = api.do("DELETE", "/v1/connectors/bank.wire", system, "")
	require.Equal(t, http.StatusUnauthorized, r.status, "revoked: %s", r.raw)
	res = proctest.Run(t, env, server, "tokens", "list", "-system")
	require.Regexp(t, `platform\s+\S+\s+revoked `, res.Stdout)

	enqueue := `{"connector":"bank.wire","idempotency_key":"w-1","args":{"account":"a-1","amount":10},"run_id":"run-7"}`
	first := api.do("POST", "/v1/effects", tokenA, enqueue, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusCreated, first.status, first.raw)
	id := first.body["id"].(string)
	replay := api.do("POST", "/v1/effects", tokenA, enqueue, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusCreated, replay.status)
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.raw, replay.raw)
	reused := api.do("POST", "/v1/effects", tokenA, strings.Replace(enqueue, "10", "11", 1), "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusUnprocessableEntity, reused.status)
	require.Equal(t, "idempotency_key_reused", reused.code())
	require.Equal(t, 1, count(`SELECT count(*) FROM reckon_effects`))

	stuck := api.do("POST", "/v1/effects", tokenA, `{"connector":"bank.wire","idempotency_key":"w-2","args":{"account":"a-1","amount":20}}`)
	require.Equal(t, http.StatusCreated, stuck.status, stuck.raw)
	stuckID := stuck.body["id"].(string)
	for _, to := range []string{"UNKNOWN", "STUCK"} { // what a reactor does when the bank's answers stay inconclusive
		_, err := pool.Exec(ctx, `UPDATE reckon_effects SET state = $2, transition_actor = 'reactor', transition_reason = 'inconclusive' WHERE id = $1`, stuckID, to)
		require.NoError(t, err)
	}

	requireRefusalsChangeNothing(t, api, tokens, enqueue, count, id, stuckID)

	// A's operator decisions.
	list := api.do("GET", "/v1/effects?run=run-7", tokenA, "")
	require.Len(t, list.body["effects"], 1, "filtered by run")
	list = api.do("GET", "/v1/effects?state=STUCK", tokenA, "")
	require.Len(t, list.body["effects"], 1)
	r = api.do("POST", "/v1/effects/"+stuckID+"/resolve", tokenA, `{"to":"CONFIRMED","reason":"bank statement shows it","actor":"alice"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, "CONFIRMED", r.body["state"])
	r = api.do("POST", "/v1/effects/"+id+"/resolve", tokenA, `{"to":"FAILED","reason":"customer cancelled"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, "FAILED", r.body["state"])
	r = api.do("GET", "/v1/effects/"+stuckID, tokenA, "")
	history := r.body["history"].([]any)
	last := history[len(history)-1].(map[string]any)
	require.Equal(t, "operator:api:billing/alice", last["actor"])
	require.Equal(t, 0, bank.Calls("/reckon/wires"), "no reactor ran: nothing was sent")

	code, metrics := get(t, api.base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, `reckon_http_requests_total{code="201",method="post",route="/v1/effects"} 3`, "two effects and one replay")
	require.Contains(t, metrics, `reckon_http_requests_total{code="422",method="post",route="/v1/effects"} 1`)
	require.Contains(t, metrics, `reckon_http_request_duration_seconds_count{method="get",route="/v1/effects/{id}"}`)
	require.NotContains(t, metrics, "reckon_api_request", "one set of request metrics: httpobs's")

	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
}

// TestAPIEndToEndWithReactor: the server and reactor binaries on one database, the fake bank behind
// an HTTP connector defined over the API. An effect enqueued over HTTP is dispatched by the
// reactor and shows CONFIRMED over HTTP; one whose outcome the bank hides (connection dropped after
// the wire, status checks inconclusive) ends STUCK and an operator resolves it over HTTP. The
// bank's ledger shows each wire once.
func TestAPIEndToEndWithReactor(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	token := tenantToken(t, env, server, "acme", "-name", "ops")

	api, srv := startServer(t, env, server)
	reactor := startFastReactor(t, env, "-in-flight-margin", "2s")

	bank := fakebank.New(t)
	base := bank.URL() + fakebank.ReckonPrefix
	api.putConnectorFor(reactor, systemToken(t, env, server), `{"name":"bank.wire","tags":["write","external","network"],
		"dispatch_url":"`+base+`/wires","status_url":"`+base+`/wires/status","timeout_ms":1000,
		"status_check_limit":2,"backoff_initial_ms":20,"backoff_max_ms":200}`)
	bank.Script("w-fog", fakebank.PerformThenDrop)
	bank.ScriptStatus("w-fog", fakebank.StatusInconclusive, fakebank.StatusInconclusive)

	ids := map[string]string{}
	for _, key := range []string{"w-ok", "w-fog"} {
		r := api.do("POST", "/v1/effects", token, `{"connector":"bank.wire","idempotency_key":"`+key+`","args":{"account":"a-1","amount":10}}`)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		ids[key] = r.body["id"].(string)
	}
	stateOf := func(key string) string {
		r := api.do("GET", "/v1/effects/"+ids[key], token, "")
		require.Equal(t, http.StatusOK, r.status, r.raw)
		return r.body["state"].(string)
	}
	require.Eventually(t, func() bool { return stateOf("w-ok") == "CONFIRMED" }, 60*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { return stateOf("w-fog") == "STUCK" }, 60*time.Second, 50*time.Millisecond)

	stuck := api.do("GET", "/v1/effects?state=STUCK", token, "")
	require.Len(t, stuck.body["effects"], 1)
	r := api.do("POST", "/v1/effects/"+ids["w-fog"]+"/resolve", token, `{"to":"CONFIRMED","reason":"the bank's statement shows the wire","actor":"alice"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, "CONFIRMED", stateOf("w-fog"))
	r = api.do("GET", "/v1/effects/"+ids["w-fog"], token, "")
	var path []string
	for _, step := range r.body["history"].([]any) {
		path = append(path, step.(map[string]any)["to"].(string))
	}
	require.Equal(t, []string{"PENDING", "UNKNOWN", "STUCK", "CONFIRMED"}, path)
	require.Equal(t, 1, bank.Count("w-ok"))
	require.Equal(t, 1, bank.Count("w-fog"), "performed once; never blindly sent again")

	stopBoth(t, srv, reactor)
}

// apiTokens are the tokens createTokensCLI printed: acme's admin, acme's (a), globex's (b),
// acme's revoked one, and a system token with its id.
type apiTokens struct {
	admin, a, b, revoked, system, systemID string
}

// createTokensCLI creates the tenants acme and globex and their tokens with the CLI, which refuses
// duplicates, bad names and conflicting flags, lists tokens with their kind, and stores them
// hashed (count counts rows).
func createTokensCLI(t *testing.T, env []string, server string, count func(sql string, args ...any) int) apiTokens {
	t.Helper()
	for _, tenant := range []string{"acme", "globex"} {
		res := proctest.Run(t, env, server, "tenants", "create", tenant, "-name", strings.ToUpper(tenant))
		require.Equal(t, 0, res.ExitCode, res.Stderr)
	}
	res := proctest.Run(t, env, server, "tenants", "create", "acme")
	require.Equal(t, 1, res.ExitCode)
	require.Contains(t, res.Stderr, "tenant already exists")
	res = proctest.Run(t, env, server, "tenants", "create", "bad tenant!")
	require.Equal(t, 1, res.ExitCode)
	res = proctest.Run(t, env, server, "tokens", "create", "-tenant", "nobody")
	require.Equal(t, 1, res.ExitCode)
	require.Contains(t, res.Stderr, "tenant not found")
	res = proctest.Run(t, env, server, "tokens", "create")
	require.Equal(t, 2, res.ExitCode, "-tenant or -system is required")

	newToken := func(args ...string) (string, string) {
		res := proctest.Run(t, env, server, append([]string{"tokens", "create"}, args...)...)
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		token := strings.TrimSpace(res.Stdout)
		require.Regexp(t, `^rk_[A-Za-z0-9_-]{43}$`, token)
		require.Contains(t, res.Stderr, "printed on stdout and shown only now", "labeled, so that the id is not taken for the token")
		id := regexp.MustCompile("`tokens revoke`: ([0-9a-f-]{36})").FindStringSubmatch(res.Stderr)
		require.NotNil(t, id, res.Stderr)
		return token, id[1]
	}
	admin, _ := newToken("-tenant", "acme", "-name", "ops", "-admin")
	tokenA, _ := newToken("-tenant", "acme", "-name", "billing")
	tokenB, _ := newToken("-tenant", "globex")
	revoked, revokedID := newToken("-tenant", "acme", "-name", "leaked")
	system, systemID := newToken("-system", "-name", "platform")
	for _, args := range [][]string{
		{"create", "-system", "-tenant", "acme"},
		{"create", "-system", "-admin"},
		{"list"},
		{"list", "-system", "-tenant", "acme"},
	} {
		res := proctest.Run(t, env, server, append([]string{"tokens"}, args...)...)
		require.Equal(t, 2, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Contains(t, res.Stderr, "-system", "%v: the message names the choice", args)
	}
	res = proctest.Run(t, env, server, "tokens", "list", "-system")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, systemID+`\s+rk_\S+\s+platform\s+\S+\s+live \(system\)`, res.Stdout)
	require.NotContains(t, res.Stdout, "leaked", "tenants' tokens are not system tokens")
	res = proctest.Run(t, env, server, "tokens", "revoke", revokedID)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, server, "tokens", "list", "-tenant", "acme")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `leaked\s+\S+\s+revoked`, res.Stdout)
	require.Regexp(t, `ops\s+\S+\s+live \(admin\)`, res.Stdout)
	require.NotContains(t, res.Stdout, "platform", "a system token is no tenant's")
	// Stored hashed: the SHA-256 is there, the token itself nowhere.
	require.Equal(t, 1, count(`SELECT count(*) FROM reckon_api_tokens WHERE token_sha256 = sha256(convert_to($1, 'UTF8'))`, admin))
	require.Zero(t, count(`SELECT count(*) FROM reckon_api_tokens t WHERE strpos(row_to_json(t)::text, $1) > 0`, admin))
	return apiTokens{admin: admin, a: tokenA, b: tokenB, revoked: revoked, system: system, systemID: systemID}
}

// requireRefusalsChangeNothing: tenant b sees and changes nothing of a's effects (ids); a revoked
// or missing token, an oversized or broken body and a bad filter are refused and change nothing
// either (count counts rows).
func requireRefusalsChangeNothing(t *testing.T, api apiClient, tokens apiTokens, enqueue string, count func(sql string, args ...any) int, ids ...string) {
	t.Helper()
	snapshot := func() [3]int {
		return [3]int{count(`SELECT count(*) FROM reckon_effects`), count(`SELECT count(*) FROM reckon_effect_transitions`), count(`SELECT count(*) FROM reckon_idempotency_keys`)}
	}
	before := snapshot()
	for _, effectID := range ids {
		require.Equal(t, http.StatusNotFound, api.do("GET", "/v1/effects/"+effectID, tokens.b, "").status)
		require.Equal(t, http.StatusNotFound, api.do("POST", "/v1/effects/"+effectID+"/resolve", tokens.b, `{"to":"CONFIRMED","reason":"x"}`).status)
		require.Equal(t, http.StatusNotFound, api.do("POST", "/v1/effects/"+effectID+"/resolve", tokens.b, `{"to":"FAILED","reason":"x"}`).status)
		require.Equal(t, http.StatusNotFound, api.do("POST", "/v1/effects/"+effectID+"/cancel", tokens.b, `{"reason":"x"}`).status)
	}
	list := api.do("GET", "/v1/effects?run=run-7", tokens.b, "")
	require.Equal(t, http.StatusOK, list.status)
	require.Empty(t, list.body["effects"])
	require.Equal(t, http.StatusUnauthorized, api.do("POST", "/v1/effects", tokens.revoked, strings.Replace(enqueue, "w-1", "w-9", 1)).status)
	require.Equal(t, http.StatusUnauthorized, api.do("POST", "/v1/effects", "", strings.Replace(enqueue, "w-1", "w-9", 1)).status)
	r := api.do("POST", "/v1/effects", tokens.a, `{"connector":"bank.wire","idempotency_key":"w-9","args":{"pad":"`+strings.Repeat("x", 5000)+`"}}`, "Idempotency-Key", "big")
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	require.Equal(t, "body_too_large", r.code())
	r = api.do("POST", "/v1/effects", tokens.a, `{"connector":"bank.wire",`, "Idempotency-Key", "broken")
	require.Equal(t, "invalid_json", r.code())
	r = api.do("GET", "/v1/effects?state=STUCKISH", tokens.a, "")
	require.Equal(t, "invalid_state", r.code())
	require.Equal(t, before, snapshot())
}
