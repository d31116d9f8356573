package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// bearer adds a token to every request of an MCP client's HTTP transport.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens an MCP session of token with the Go SDK's client over Streamable HTTP.
func mcpConnect(t *testing.T, base, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "reckon-test", Version: "1"}, opts)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1,
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// mcpEnv is a server and a reactor on a database, a tenant's token, and the fake banks behind
// the connectors registered over the API.
type mcpEnv struct {
	t       *testing.T
	server  string
	env     []string
	pool    *pgxpool.Pool
	srv     *proctest.Process
	base    string
	tokens  map[string]string
	system  string
	bank    *fakebank.Bank // bank.wire, bank.held, globex.report: succeeds
	flaky   *fakebank.Bank // bank.flaky: performs, then drops the connection
	hanging *fakebank.Bank // bank.slow: performs, then hangs past the connector's timeout
}

const wireArgsSchema = `{"type":"object","properties":{"account":{"type":"string","minLength":1},` +
	`"amount":{"type":"integer","minimum":1}},"required":["account","amount"],"additionalProperties":false}`

// newMCPEnv starts a server and a reactor and registers the connectors.
func newMCPEnv(t *testing.T, serverArgs ...string) *mcpEnv {
	t.Helper()
	server, pool, env := serverOnDB(t)
	e := &mcpEnv{t: t, server: server, env: env, pool: pool, tokens: tenantTokens(t, env, server, "acme", "globex"),
		bank: fakebank.New(t), flaky: fakebank.New(t), hanging: fakebank.New(t)}
	e.startServer(serverArgs...)
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms", "-in-flight-margin", "2s")
	reactor.Addr(t)
	e.flaky.SetDefault(fakebank.PerformThenDrop)
	e.hanging.SetDefault(fakebank.PerformThenHang)
	api := apiClient{t: t, base: e.base}
	system := systemToken(t, env, server)
	e.system = system
	put := func(body string) {
		t.Helper()
		r := api.do("POST", "/v1/connectors", system, body)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
	}
	wire := func(name string, bank *fakebank.Bank, extra string) {
		base := bank.URL() + fakebank.ReckonPrefix
		put(`{"name":"` + name + `","tags":["write","external","network"],"dispatch_url":"` + base + `/wires",
			"status_url":"` + base + `/wires/status","timeout_ms":1000,"backoff_initial_ms":20,"backoff_max_ms":200,
			"description":"Wire money to an account.","args_schema":` + wireArgsSchema + extra + `}`)
	}
	wire("bank.wire", e.bank, "")
	wire("bank.flaky", e.flaky, "")
	wire("bank.slow", e.hanging, "")
	wire("bank.held", e.bank, `,"requires_confirmation":true,"confirmation_prompt":"Wire {amount} to {account}?"`)
	put(`{"name":"globex.report","tags":["read"],"dispatch_url":"` + e.bank.URL() + fakebank.ReckonPrefix + `/wires","tenants":["globex"]}`)
	// A schema that does not compile is refused, and nothing is stored.
	r := api.do("POST", "/v1/connectors", system, `{"name":"bad.schema","dispatch_url":"`+e.bank.URL()+`","tags":["read"],"args_schema":{"type":"object","properties":{"n":{"type":"integr"}}}}`)
	require.Equal(t, http.StatusBadRequest, r.status, r.raw)
	require.Contains(t, r.raw, "args schema")
	require.Zero(t, testkit.Count(t, pool, `SELECT count(*) FROM reckon_connectors WHERE name = 'bad.schema'`))
	require.Eventually(t, func() bool { return strings.Count(reactor.Stderr(), `"msg":"http connector added"`) >= 5 },
		30*time.Second, 20*time.Millisecond, "the reactor loads the connectors")
	return e
}

func (e *mcpEnv) startServer(args ...string) {
	e.srv = proctest.Start(e.t, e.env, e.server, append([]string{"-addr", "127.0.0.1:0", "-mcp-wait", "8s"}, args...)...)
	e.base = "http://" + e.srv.Addr(e.t)
}

func (e *mcpEnv) effects(tenant string) int {
	return testkit.Count(e.t, e.pool, `SELECT count(*) FROM reckon_effects WHERE tenant_id = $1`, tenant)
}

func wireCall(tool, account string, amount int, key string) *mcp.CallToolParams {
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"account": account, "amount": amount}}
	if key != "" {
		params.Meta = mcp.Meta{"reckon/idempotency_key": key}
	}
	return params
}

// effectOf is the effect id and idempotency key an answer names.
func effectOf(t *testing.T, res *mcp.CallToolResult) (id, key string) {
	t.Helper()
	id, _ = res.Meta["reckon/effect_id"].(string)
	key, _ = res.Meta["reckon/idempotency_key"].(string)
	require.NotEmpty(t, id, "%+v", res)
	return id, key
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPGateway drives /mcp on the server binary with the Go SDK's MCP client, a reactor
// dispatching: tools are the tenant's connectors (schemas, annotations, scoping); a call that
// succeeds; one whose upstream performs and drops the connection (UNKNOWN, then CONFIRMED by the
// status check, performed once); invalid args refused with nothing written; a held call
// confirmed and declined through elicitation; a call whose answer is lost re-sent as the same
// request (same effect, performed once); the server SIGKILLed during a call and the call re-sent
// after the restart (performed once).
func TestMCPGateway(t *testing.T) {
	t.Parallel()
	e := newMCPEnv(t)
	ctx := context.Background()

	// Tools: a token sees its tenant's connectors, with their schemas and annotations.
	var progress []string
	var progressMu sync.Mutex
	acme := mcpConnect(t, e.base, e.tokens["acme"], &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progressMu.Lock()
			defer progressMu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	})
	tools, err := acme.ListTools(ctx, nil)
	require.NoError(t, err)
	names := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = tool
	}
	require.ElementsMatch(t, []string{"bank.wire", "bank.flaky", "bank.slow", "bank.held"}, slices.Collect(maps.Keys(names)),
		"acme does not see globex's connector")
	wire := names["bank.wire"]
	require.Equal(t, "Wire money to an account.", wire.Description)
	schema, _ := wire.InputSchema.(map[string]any)
	require.Equal(t, []any{"account", "amount"}, schema["required"], "the args schema is the input schema")
	require.False(t, wire.Annotations.ReadOnlyHint)
	require.False(t, *wire.Annotations.DestructiveHint)
	require.False(t, wire.Annotations.IdempotentHint)
	require.True(t, *wire.Annotations.OpenWorldHint)

	globex := mcpConnect(t, e.base, e.tokens["globex"], nil)
	globexTools, err := globex.ListTools(ctx, nil)
	require.NoError(t, err)
	var report *mcp.Tool
	for _, tool := range globexTools.Tools {
		if tool.Name == "globex.report" {
			report = tool
		}
	}
	require.NotNil(t, report, "globex sees its own connector")
	require.True(t, report.Annotations.ReadOnlyHint)
	require.False(t, *report.Annotations.OpenWorldHint)
	_, err = acme.CallTool(ctx, &mcp.CallToolParams{Name: "globex.report", Arguments: map[string]any{}})
	require.ErrorContains(t, err, `unknown tool "globex.report"`, "another tenant's tool cannot be called")
	require.Zero(t, e.effects("acme"))

	// A call that succeeds: the result as structured content and text, with progress.
	params := wireCall("bank.wire", "a-1", 100, "")
	params.SetProgressToken("p-1")
	res, err := acme.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	result, _ := res.StructuredContent.(map[string]any)
	require.Equal(t, float64(100), result["amount"], "%+v", res.StructuredContent)
	require.Contains(t, text(res), `"wire_id"`)
	id, key := effectOf(t, res)
	require.True(t, strings.HasPrefix(key, "mcp/"+acme.ID()+"/"), "a derived key names the session: %s", key)
	require.Equal(t, 1, e.bank.Count(key))
	progressMu.Lock()
	require.NotEmpty(t, progress, "progress notifications while the effect moves")
	progressMu.Unlock()

	// Its evidence, as a resource; not readable by another tenant.
	read, err := acme.ReadResource(ctx, &mcp.ReadResourceParams{URI: "reckon://effects/" + id})
	require.NoError(t, err)
	require.Contains(t, read.Contents[0].Text, `"state": "CONFIRMED"`)
	require.Contains(t, read.Contents[0].Text, `"history"`)
	_, err = globex.ReadResource(ctx, &mcp.ReadResourceParams{URI: "reckon://effects/" + id})
	require.Error(t, err, "another tenant's effect is not found")

	// Invalid args: an MCP error, nothing written.
	before := e.effects("acme")
	for _, args := range []any{map[string]any{"account": "a-1", "amount": "ten"}, map[string]any{"account": "a-1"}, []int{1}} {
		_, err := acme.CallTool(ctx, &mcp.CallToolParams{Name: "bank.wire", Arguments: args})
		require.Error(t, err, "%v", args)
	}
	require.Equal(t, before, e.effects("acme"), "refused calls record nothing")

	// The upstream performs and drops the connection: UNKNOWN, the status check finds the wire,
	// CONFIRMED; performed once.
	res, err = acme.CallTool(ctx, wireCall("bank.flaky", "a-2", 7, "flaky-1"))
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	id, _ = effectOf(t, res)
	require.Equal(t, 1, e.flaky.Count("flaky-1"))
	require.Equal(t, 1, testkit.Count(t, e.pool, `SELECT count(*) FROM reckon_effect_transitions WHERE effect_id = $1 AND to_state = 'UNKNOWN'`, id))
	// Sent again with the caller's key: the same effect, not a second wire.
	again, err := acme.CallTool(ctx, wireCall("bank.flaky", "a-2", 7, "flaky-1"))
	require.NoError(t, err)
	againID, _ := effectOf(t, again)
	require.Equal(t, id, againID)
	require.Equal(t, 1, e.flaky.Count("flaky-1"))
	// The same key with other args is refused.
	_, err = acme.CallTool(ctx, wireCall("bank.flaky", "a-2", 8, "flaky-1"))
	require.ErrorContains(t, err, "belongs to another call")

	// A call whose outcome cannot be established (the status checks stay inconclusive): STUCK, an
	// answer that says a person must decide; performed once.
	e.hanging.ScriptStatus("stuck-1", slices.Repeat([]fakebank.StatusBehavior{fakebank.StatusInconclusive}, 10)...)
	res, err = acme.CallTool(ctx, wireCall("bank.slow", "a-6", 4, "stuck-1"))
	require.NoError(t, err)
	require.False(t, res.IsError, "not an error: the call may have been performed")
	require.Contains(t, text(res), "a person must decide")
	require.Equal(t, "STUCK", res.Meta["reckon/state"])
	require.Equal(t, 1, e.hanging.Count("stuck-1"))

	// The HTTP API applies the same rules: args the schema refuses, another tenant's connector.
	api := apiClient{t: t, base: e.base}
	r := api.do("POST", "/v1/effects", e.tokens["acme"], `{"connector":"bank.wire","idempotency_key":"api-1","args":{"account":"a-1","amount":0}}`)
	require.Equal(t, http.StatusBadRequest, r.status, r.raw)
	require.Contains(t, r.raw, "args schema")
	r = api.do("POST", "/v1/effects", e.tokens["acme"], `{"connector":"globex.report","idempotency_key":"api-2","args":{}}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.raw)
	require.Equal(t, before+2, e.effects("acme"), "the API recorded nothing: only flaky-1 and stuck-1 since")

	// Nor does the API show acme globex's connector, or globex's name.
	r = api.do("GET", "/v1/connectors", e.tokens["acme"], "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.NotContains(t, r.raw, "globex")
	r = api.do("GET", "/v1/connectors/globex.report", e.tokens["acme"], "")
	require.Equal(t, http.StatusNotFound, r.status, r.raw)
	r = api.do("GET", "/v1/connectors/globex.report", e.tokens["globex"], "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, []any{"globex"}, r.body["tenants"])

	// A connector stored while a session lasts is one of its tools at the next tools/list.
	r = api.do("POST", "/v1/connectors", e.system, `{"name":"bank.new","tags":["read"],"dispatch_url":"`+e.bank.URL()+`/reckon/wires"}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	tools, err = acme.ListTools(ctx, nil)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "bank.new" }))

	// A call in an agent run: the run's guardrails apply (one step), and a cancelled run refuses.
	r = api.do("POST", "/v1/runs", e.tokens["acme"], `{"id":"run-1","max_steps":1}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	inRun := func(key string) (*mcp.CallToolResult, error) {
		params := wireCall("bank.wire", "a-9", 2, key)
		params.Meta["reckon/run_id"] = "run-1"
		return acme.CallTool(ctx, params)
	}
	res, err = inRun("run-1/a")
	require.NoError(t, err)
	require.Equal(t, "CONFIRMED", res.Meta["reckon/state"], text(res))
	before = e.effects("acme")
	_, err = inRun("run-1/b")
	require.ErrorContains(t, err, "nothing was recorded", "past the run's max_steps")
	require.Equal(t, before, e.effects("acme"))

	// A held call, answered through elicitation: confirmed, then declined.
	var decision string
	elicited := mcpConnect(t, e.base, e.tokens["acme"], &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			require.Contains(t, req.Params.Message, "Wire 5 to a-3?")
			if decision == "confirm" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "reason": "I asked for it"}}, nil
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	decision = "confirm"
	res, err = elicited.CallTool(ctx, wireCall("bank.held", "a-3", 5, "held-yes"))
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	require.Equal(t, 1, e.bank.Count("held-yes"))
	require.Equal(t, 1, testkit.Count(t, e.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key = 'held-yes'
		AND confirmation = 'CONFIRMED' AND confirmation_by = 'mcp:'||(SELECT prefix FROM reckon_api_tokens WHERE tenant_id = 'acme')
		AND confirmation_reason = 'I asked for it'`))
	decision = "decline"
	res, err = elicited.CallTool(ctx, wireCall("bank.held", "a-3", 5, "held-no"))
	require.NoError(t, err)
	require.True(t, res.IsError, "a declined call is FAILED: %s", text(res))
	require.Contains(t, text(res), "declined")
	require.Zero(t, e.bank.Count("held-no"))
	// A client that cannot elicit is told what to confirm and where; nothing is performed.
	res, err = acme.CallTool(ctx, wireCall("bank.held", "a-3", 5, "held-later"))
	require.NoError(t, err)
	require.Contains(t, text(res), "waits for a person's confirmation")
	require.Contains(t, text(res), e.base+"/console/awaiting")
	require.Zero(t, e.bank.Count("held-later"))

	// A call whose answer is lost, sent again as the same request: the same effect, performed once.
	raw := newRawMCP(t, e.base, e.tokens["acme"])
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bank.slow","arguments":{"account":"a-4","amount":3}}}`
	_, err = raw.post(body, 300*time.Millisecond)
	require.Error(t, err, "the answer is lost: the upstream hangs past the client's patience")
	var answer map[string]any
	require.Eventually(t, func() bool {
		reply, err := raw.post(body, 15*time.Second)
		if err != nil || strings.Contains(reply, "already in use") || strings.Contains(reply, "in-flight") {
			return false // the first request still runs: a client tries again later
		}
		require.NoError(t, json.Unmarshal([]byte(reply), &answer), reply)
		return true
	}, 30*time.Second, 200*time.Millisecond)
	lost, _ := answer["result"].(map[string]any)
	require.NotNil(t, lost, "%v", answer)
	meta, _ := lost["_meta"].(map[string]any)
	lostKey, _ := meta["reckon/idempotency_key"].(string)
	require.Equal(t, "mcp/"+raw.session+"/7", lostKey)
	require.Equal(t, 1, testkit.Count(t, e.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key = $1`, lostKey))
	require.Equal(t, 1, e.hanging.Count(lostKey), "performed once")

	// The server SIGKILLed during a call; after the restart the client sends the call again with
	// its key: one performance.
	performed := e.hanging.Performed()
	for len(performed) > 0 {
		<-performed
	}
	callDone := make(chan error, 1)
	go func() {
		_, err := acme.CallTool(ctx, wireCall("bank.slow", "a-5", 9, "kill-1"))
		callDone <- err
	}()
	select {
	case entry := <-performed:
		require.Equal(t, "kill-1", entry.Key)
	case <-time.After(20 * time.Second):
		t.Fatal("the wire was not performed")
	}
	require.NoError(t, e.srv.Kill())
	require.Error(t, <-callDone, "the call's connection died with the server")
	e.startServer()
	after := mcpConnect(t, e.base, e.tokens["acme"], nil)
	res, err = after.CallTool(ctx, wireCall("bank.slow", "a-5", 9, "kill-1"))
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	require.Equal(t, 1, e.hanging.Count("kill-1"), "performed once")
	require.Equal(t, 1, testkit.Count(t, e.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key = 'kill-1'`))

	// An open session (its event stream) does not hold up a graceful stop.
	e.srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, e.srv.Wait(t, 5*time.Second), "the server stops at once despite the open MCP session")
}

// TestMCPAuth: /mcp refuses requests without a live tenant token and bodies over the server's
// limit, and a session belongs to the token that opened it.
func TestMCPAuth(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	tokens := tenantTokens(t, env, server, "acme", "globex")
	system := systemToken(t, env, server)
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	base := "http://" + srv.Addr(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	for token, want := range map[string]int{"": http.StatusUnauthorized, "rk_nope": http.StatusUnauthorized, system: http.StatusForbidden} {
		resp, _ := testkit.Do(t, "POST", base+"/mcp", token, init, "Accept", "application/json, text/event-stream")
		require.Equal(t, want, resp.StatusCode, "token %q", token)
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	resp, _ := testkit.Do(t, "POST", base+"/mcp", tokens["acme"], huge, "Accept", "application/json, text/event-stream")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "bodies are bounded by -max-body-bytes, as the API's")
	// Behind a proxy on the same host: the request comes to the loopback address with the public
	// Host, and is served.
	proxied, err := http.NewRequest("POST", base+"/mcp", strings.NewReader(init))
	require.NoError(t, err)
	proxied.Host = "reckon.example.com"
	proxied.Header.Set("Authorization", "Bearer "+tokens["acme"])
	proxied.Header.Set("Content-Type", "application/json")
	proxied.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(proxied)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	raw := newRawMCP(t, base, tokens["acme"])
	raw.token = tokens["globex"]
	_, err = raw.post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 5*time.Second)
	require.ErrorContains(t, err, "403", "another tenant's token cannot use acme's session")
}

// TestMCPStdio drives `server mcp -token T` as a local MCP client starts it: over its stdin and
// stdout, with a reactor dispatching.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	token := tenantToken(t, env, server, "acme")
	res := proctest.Run(t, env, server, "mcp")
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "-token is required")
	res = proctest.Run(t, env, server, "mcp", "-token", "rk_nope")
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "invalid or revoked token")

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms")
	bank := fakebank.New(t)
	base := bank.URL() + fakebank.ReckonPrefix
	api, system := apiClient{t: t, base: "http://" + srv.Addr(t)}, systemToken(t, env, server)
	r := api.do("POST", "/v1/connectors", system,
		`{"name":"bank.wire","tags":["write","external"],"dispatch_url":"`+base+`/wires","status_url":"`+base+`/wires/status","args_schema":`+wireArgsSchema+`}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	hanging := fakebank.New(t)
	hanging.SetDefault(fakebank.PerformThenHang)
	slow := hanging.URL() + fakebank.ReckonPrefix
	r = api.do("POST", "/v1/connectors", system,
		`{"name":"bank.slow","tags":["write","external"],"dispatch_url":"`+slow+`/wires","status_url":"`+slow+`/wires/status",
		"timeout_ms":4000,"backoff_initial_ms":20,"backoff_max_ms":200}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	r = api.do("POST", "/v1/connectors", system, `{"name":"bank.held","tags":["write","external"],"dispatch_url":"`+base+`/wires",
		"status_url":"`+base+`/wires/status","requires_confirmation":true,"confirmation_prompt":"Wire {amount}?"}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	r = api.do("POST", "/v1/connectors", system, `{"name":"bank.limited","tags":["write","external"],"dispatch_url":"`+base+`/wires",
		"status_url":"`+base+`/wires/status","limit":{"rate":1,"per_ms":3600000,"burst":1,"per_tenant":true}}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	require.Eventually(t, func() bool { return strings.Count(reactor.Stderr(), `"msg":"http connector added"`) >= 4 }, 30*time.Second, 20*time.Millisecond)

	cmd := exec.Command(server, "mcp", "-token", token, "-wait", "2s")
	cmd.Env = append(cmd.Environ(), env...)
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer session.Close()
	ctx := context.Background()
	tools, err := session.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 4)

	answer, err := session.CallTool(ctx, wireCall("bank.wire", "a-1", 12, ""))
	require.NoError(t, err)
	require.False(t, answer.IsError, text(answer))
	_, key := effectOf(t, answer)
	require.True(t, strings.HasPrefix(key, "mcp/stdio-"), key)
	require.Equal(t, 1, bank.Count(key))
	first, err := session.CallTool(ctx, wireCall("bank.wire", "a-1", 12, "stdio-1"))
	require.NoError(t, err)
	second, err := session.CallTool(ctx, wireCall("bank.wire", "a-1", 12, "stdio-1"))
	require.NoError(t, err)
	firstID, _ := effectOf(t, first)
	secondID, _ := effectOf(t, second)
	require.Equal(t, firstID, secondID)
	require.Equal(t, 1, bank.Count("stdio-1"))
	_, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "bank.wire", Arguments: map[string]any{"account": ""}})
	require.ErrorContains(t, err, "args schema")

	// Still PENDING after the wait (the upstream hangs past the connector's timeout): the answer
	// says the outcome is being checked and names the key; calls made again with it are the same
	// effect, until it is CONFIRMED by the status check. Performed once.
	pending, err := session.CallTool(ctx, wireCall("bank.slow", "a-2", 1, ""))
	require.NoError(t, err)
	require.False(t, pending.IsError)
	require.Contains(t, text(pending), "outcome is being checked")
	pendingID, pendingKey := effectOf(t, pending)
	require.Contains(t, text(pending), `"`+pendingKey+`"`)
	require.Equal(t, "being checked", pending.StructuredContent.(map[string]any)["outcome"])
	require.Eventually(t, func() bool {
		again, err := session.CallTool(ctx, wireCall("bank.slow", "a-2", 1, pendingKey))
		require.NoError(t, err)
		againID, _ := effectOf(t, again)
		require.Equal(t, pendingID, againID)
		return again.Meta["reckon/state"] == "CONFIRMED"
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, hanging.Count(pendingKey))

	// The connector's limits apply as for the API: one call an hour for the tenant, so the
	// second waits, recorded and not performed.
	limited, err := session.CallTool(ctx, wireCall("bank.limited", "a-7", 1, "limited-1"))
	require.NoError(t, err)
	require.Equal(t, "CONFIRMED", limited.Meta["reckon/state"], text(limited))
	limited, err = session.CallTool(ctx, wireCall("bank.limited", "a-7", 1, "limited-2"))
	require.NoError(t, err)
	require.Equal(t, "PENDING", limited.Meta["reckon/state"], text(limited))
	require.Contains(t, text(limited), "outcome is being checked")
	require.Equal(t, 1, bank.Count("limited-1"))
	require.Zero(t, bank.Count("limited-2"))

	// A held call, confirmed through elicitation over stdio. Here the SDK's client and server
	// agree on protocol 2026-07-28: the confirmation is an input request in the call's answer, and
	// the client's retry carries requestState (over HTTP, 2025-11-25: an elicitation/create request).
	stdio := func(confirm func(*mcp.ElicitRequest) (*mcp.ElicitResult, error), flags ...string) *mcp.ClientSession {
		cmd := exec.Command(server, append([]string{"mcp", "-token", token, "-wait", "5s"}, flags...)...)
		cmd.Env = append(cmd.Environ(), env...)
		client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return confirm(req) },
		})
		session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = session.Close() })
		return session
	}
	asked := 0
	eliciting := stdio(func(req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		require.Contains(t, req.Params.Message, "Wire 30?")
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	})
	t.Logf("stdio protocol %s", eliciting.InitializeResult().ProtocolVersion)
	held, err := eliciting.CallTool(ctx, wireCall("bank.held", "a-3", 30, "held-stdio"))
	require.NoError(t, err)
	require.False(t, held.IsError, text(held))
	require.Equal(t, "CONFIRMED", held.Meta["reckon/state"])
	require.Equal(t, 1, asked)
	require.Equal(t, 1, bank.Count("held-stdio"))

	// Under four eyes the caller is not asked: another person confirms (here over the API), and
	// the call made again with its key answers the outcome.
	fourEyes := stdio(func(*mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		t.Error("asked to confirm under four eyes")
		return &mcp.ElicitResult{Action: "decline"}, nil
	}, "-four-eyes", "-console-url", "https://reckon.example.com/console")
	held, err = fourEyes.CallTool(ctx, wireCall("bank.held", "a-3", 31, "held-4eyes"))
	require.NoError(t, err)
	require.Contains(t, text(held), "waits for a person's confirmation")
	require.Contains(t, text(held), "https://reckon.example.com/console/awaiting")
	heldID, _ := effectOf(t, held)
	require.Zero(t, bank.Count("held-4eyes"))
	r = api.do("POST", "/v1/effects/"+heldID+"/confirm", token, `{"reason":"looked at it","actor":"alice"}`)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	held, err = fourEyes.CallTool(ctx, wireCall("bank.held", "a-3", 31, "held-4eyes"))
	require.NoError(t, err)
	require.Equal(t, "CONFIRMED", held.Meta["reckon/state"], text(held))
	require.Equal(t, 1, bank.Count("held-4eyes"))
}

// TestConnectorsPutDescribed: `server connectors put` stores a description, an args schema and
// tenants from its flags; a schema that does not compile exits 2 and stores nothing.
func TestConnectorsPutDescribed(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	res := proctest.Run(t, env, server, "connectors", "put", "-name", "tickets.open", "-tags", "write,idempotent",
		"-dispatch-url", "https://tickets.example.com/open", "-description", "Open a ticket.",
		"-args-schema", `{"type":"object","required":["title"]}`, "-tenants", "acme,globex")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, server, "connectors", "list", "-json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var defs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &defs))
	require.Len(t, defs, 1)
	require.Equal(t, "Open a ticket.", defs[0]["description"])
	require.Equal(t, map[string]any{"type": "object", "required": []any{"title"}}, defs[0]["args_schema"])
	require.Equal(t, []any{"acme", "globex"}, defs[0]["tenants"])

	res = proctest.Run(t, env, server, "connectors", "put", "-name", "tickets.bad", "-tags", "write,idempotent",
		"-dispatch-url", "https://tickets.example.com/open", "-args-schema", `{"type":"object","minProperties":"two"}`)
	require.Equal(t, 2, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, "args schema")
	require.Equal(t, 1, testkit.Count(t, pool, `SELECT count(*) FROM reckon_connectors`))
}

// rawMCP speaks Streamable HTTP by hand, to send a JSON-RPC request again with the same id.
type rawMCP struct {
	t       *testing.T
	base    string
	token   string
	session string
}

func newRawMCP(t *testing.T, base, token string) *rawMCP {
	t.Helper()
	r := &rawMCP{t: t, base: base, token: token}
	req, err := http.NewRequest("POST", base+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	require.NoError(t, err)
	r.headers(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	r.session = resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, r.session)
	_, err = r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 5*time.Second)
	require.NoError(t, err)
	return r
}

func (r *rawMCP) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
	}
}

// post sends body and returns the JSON-RPC message answering it (the first "data:" of the event
// stream), "" for a notification; an error when the request fails, times out or is refused.
func (r *rawMCP) post(body string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", r.base+"/mcp", strings.NewReader(body))
	require.NoError(r.t, err)
	r.headers(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		return "", nil
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	scanner := bufio.NewScanner(resp.Body)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		if data, ok := strings.CutPrefix(scanner.Text(), "data: "); ok && strings.Contains(data, `"id"`) {
			return data, nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no answer in the event stream")
}
