package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// turnEndpoint is a team's HTTP turn handler on 127.0.0.1: it records the turns it gets; the
// first turn of hold's session with two messages waits for release before answering; turns of
// refuse's session are answered 422; every other turn answers one irreversible wire at journal
// position (0, 0), or no effect when hold is empty.
type turnEndpoint struct {
	srv     *httptest.Server
	hold    string
	refuse  string
	release chan struct{}
	arrived chan turnRequest
	mu      sync.Mutex
	seen    []turnRequest
}

type turnRequest struct {
	SessionKey string `json:"session_key"`
	TurnID     string `json:"turn_id"`
	TurnGroup  string `json:"turn_group"`
	Seq        int    `json:"seq"`
	Attempt    int    `json:"attempt"`
	Messages   []struct {
		MessageID string          `json:"message_id"`
		Content   json.RawMessage `json:"content"`
	} `json:"messages"`
}

func newTurnEndpoint(t *testing.T, hold, refuse string) *turnEndpoint {
	e := &turnEndpoint{hold: hold, refuse: refuse, release: make(chan struct{}), arrived: make(chan turnRequest, 16)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req turnRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.seen = append(e.seen, req)
		e.mu.Unlock()
		e.arrived <- req
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.SessionKey == e.refuse:
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error":"no such order"}`)
			return
		case e.hold == "":
			_, _ = io.WriteString(w, `{"effects":[]}`)
			return
		case req.SessionKey == e.hold && len(req.Messages) == 2:
			<-e.release
		}
		_, _ = io.WriteString(w, `{"effects":[{"connector":"bank.wire","args":{"account":"a-1","amount":30},"decision":0,"call_index":0,"business_key":"refund-`+req.SessionKey+`"}]}`)
	}))
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		select {
		case <-e.release:
		default:
			close(e.release)
		}
	})
	return e
}

// TestSessionsEndToEnd: server and reactor binaries, the reactor with an HTTP turn handler. Two
// messages posted within the aggregation window form one turn; a third arriving while the handler
// decides an irreversible wire supersedes that turn; the superseding turn (same turn group, all
// three messages) enqueues the wire at the group's journal position, and the fake bank performs it
// once; enqueueing that position again deduplicates. A handler's 422 fails its turn for good, with
// the reason. Another tenant can neither post to nor read the session.
func TestSessionsEndToEnd(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	tokens := tenantTokens(t, env, server, "acme", "globex")
	acme, globex := tokens["acme"], tokens["globex"]
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	bank := fakebank.New(t)
	base := bank.URL() + fakebank.ReckonPrefix
	r := api.do("POST", "/v1/connectors", systemToken(t, env, server), `{"name":"bank.wire","tags":["write","external","network"],
		"dispatch_url":"`+base+`/wires","status_url":"`+base+`/wires/status","timeout_ms":1000,"backoff_initial_ms":20,"backoff_max_ms":200}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)

	session, refused := "acme:support-bot:user-7:whatsapp", "acme:support-bot:user-8:web"
	handler := newTurnEndpoint(t, session, refused)
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms", "-in-flight-margin", "2s",
		"-turn-handler-url", handler.srv.URL+"/turns", "-turn-handler-timeout", "30s")
	reactor.Addr(t)

	path := "/v1/sessions/" + url.PathEscape(session)
	r = api.do("POST", path+"/messages", acme, `{"message_id":"m1","content":{"text":"refund order 9"}}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	turn1 := r.body["turn"].(map[string]any)["id"].(string)
	r = api.do("POST", path+"/messages", acme, `{"message_id":"m2","content":{"text":"30 euros"},"at":"2026-11-22T03:00:00Z"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Equal(t, turn1, r.body["turn"].(map[string]any)["id"], "within the window: the same turn")
	r = api.do("POST", path+"/messages", acme, `{"message_id":"m1","content":{"text":"refund order 9"}}`)
	require.Equal(t, http.StatusOK, r.status, "a repeated message id: %s", r.raw)
	require.Equal(t, true, r.body["deduplicated"])

	// Tenant isolation.
	r = api.do("POST", path+"/messages", globex, `{"message_id":"x1"}`)
	require.Equal(t, http.StatusForbidden, r.status, r.raw)
	require.Equal(t, "session_tenant_mismatch", r.code())
	r = api.do("GET", path+"/turns", globex, "")
	require.Equal(t, http.StatusForbidden, r.status, r.raw)

	// The window closes: the reactor hands the turn of m1 and m2 to the handler, which holds its
	// answer while m3 arrives.
	first := handler.await(t, "the turn", reactor)
	require.Equal(t, session, first.SessionKey)
	require.Equal(t, turn1, first.TurnID)
	require.Len(t, first.Messages, 2)
	r = api.do("POST", path+"/messages", acme, `{"message_id":"m3","content":{"text":"no, 40 euros"}}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	turn2 := r.body["turn"].(map[string]any)["id"].(string)
	require.NotEqual(t, turn1, turn2)
	close(handler.release)

	second := handler.await(t, "the superseding turn", reactor)
	require.Equal(t, first.TurnGroup, second.TurnGroup, "the superseding turn inherits the turn group")
	require.Len(t, second.Messages, 3)
	require.Equal(t, []string{"m1", "m2", "m3"}, []string{second.Messages[0].MessageID, second.Messages[1].MessageID, second.Messages[2].MessageID})

	var views []turnView
	require.Eventually(t, func() bool {
		views = api.turns(path, acme)
		return len(views) == 2 && views[1].Status == "COMPLETE"
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, "SUPERSEDED", views[0].Status)
	require.Len(t, views[0].Decisions, 1)
	require.Equal(t, "SUPERSEDE", views[0].Decisions[0].Action)
	require.Equal(t, "default", views[0].Decisions[0].Decider)
	require.Equal(t, turn2, views[1].ID)
	require.Equal(t, first.TurnGroup, views[1].TurnGroup)
	require.Len(t, views[1].Messages, 3)

	requireWireOnce(t, api, bank, acme, first.TurnGroup)

	// A handler's 4xx fails its turn for good, with the reason; its message stays recorded.
	r = api.do("POST", "/v1/sessions/"+url.PathEscape(refused)+"/messages", acme, `{"message_id":"r1","content":{"order":404}}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Eventually(t, func() bool {
		views = api.turns("/v1/sessions/"+url.PathEscape(refused), acme)
		return len(views) == 1 && views[0].Status == "FAILED"
	}, 60*time.Second, 50*time.Millisecond)
	require.Contains(t, views[0].StatusReason, `answered 422: {"error":"no such order"}`)
	require.Len(t, views[0].Messages, 1)

	// globex's sessions are its own.
	other := "/v1/sessions/" + url.PathEscape("globex:support-bot:user-7:web")
	r = api.do("POST", other+"/messages", globex, `{"message_id":"m1"}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Equal(t, http.StatusForbidden, api.do("GET", other+"/turns", acme, "").status)
	require.Len(t, api.turns(other, globex), 1)

	stopBoth(t, srv, reactor)
}

// TestTurnsWaitWithoutTurnHandler: a reactor without -turn-handler-url says nothing of it at start;
// it leaves the turn of a tenant without a handler ACCUMULATING with its message (its job waits,
// asking again) and warns, saying how to set one; once an admin sets the tenant's handler over the
// API, the same reactor runs the turn there.
func TestTurnsWaitWithoutTurnHandler(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	token := tenantToken(t, env, server, "acme")
	res := proctest.Run(t, env, server, "tokens", "create", "-tenant", "acme", "-admin", "-name", "ops")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	admin := strings.TrimSpace(res.Stdout)
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	api := apiClient{t: t, base: "http://" + srv.Addr(t)}
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-fetch-poll-interval", "50ms",
		"-fetch-cooldown", "10ms", "-turn-not-ready-delay", "300ms")
	reactor.Addr(t)
	// No warning at start (most deployments use no turns); the waiting turn below is warned about.
	require.NotContains(t, reactor.Stderr(), "turn handler", reactor.Stderr())

	path := "/v1/sessions/" + url.PathEscape("acme:bot:user-1:email")
	r := api.do("POST", path+"/messages", token, `{"message_id":"m1","content":{"subject":"hello"}}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)
	require.Eventually(t, func() bool {
		return reactor.Logged("turn handler not ready for the session: the turn waits with its messages") &&
			strings.Contains(reactor.Stderr(), `PUT /v1/turn-handlers/acme, or reactor -turn-handler-url`) && // says how to fix it
			strings.Count(reactor.Stderr(), "turn handler not ready") >= 2 // asked again after the delay
	}, 30*time.Second, 50*time.Millisecond, reactor.Stderr())
	r = api.do("GET", path+"/turns", token, "")
	turn := r.body["turns"].([]any)[0].(map[string]any)
	require.Equal(t, "ACCUMULATING", turn["status"])
	require.EqualValues(t, 1, turn["attempt"], "no attempt spent")
	require.Len(t, turn["messages"], 1)

	handler := newTurnEndpoint(t, "", "")
	r = api.do("PUT", "/v1/turn-handlers/acme", admin, `{"url":"`+handler.srv.URL+`/turns","timeout_ms":10000}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	require.Eventually(t, func() bool {
		r := api.do("GET", path+"/turns", token, "")
		turn := r.body["turns"].([]any)[0].(map[string]any)
		return turn["status"] == "COMPLETE"
	}, 60*time.Second, 50*time.Millisecond, reactor.Stderr())
	handler.mu.Lock()
	require.Len(t, handler.seen, 1)
	require.Equal(t, "m1", handler.seen[0].Messages[0].MessageID)
	handler.mu.Unlock()

	stopBoth(t, srv, reactor)
}

// await returns the next turn the handler receives, failing the test (with the reactor's log) when
// none does within a minute.
func (e *turnEndpoint) await(t *testing.T, what string, reactor *proctest.Process) turnRequest {
	t.Helper()
	select {
	case turn := <-e.arrived:
		return turn
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never reached the handler:\n%s", what, reactor.Stderr())
		return turnRequest{}
	}
}

// turnView is a turn as GET /v1/sessions/{key}/turns lists it.
type turnView struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	TurnGroup    string `json:"turn_group"`
	Messages     []struct {
		MessageID string `json:"message_id"`
	} `json:"messages"`
	Decisions []struct {
		Action, Decider string
	} `json:"decisions"`
}

// turns lists the turns of the session at path (/v1/sessions/{key}) with token.
func (c apiClient) turns(path, token string) []turnView {
	t := c.t
	t.Helper()
	req, err := http.NewRequest("GET", c.base+path+"/turns", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Turns []turnView `json:"turns"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.Turns
}

// requireWireOnce: the wire is enqueued once by the superseding turn at the turn group's journal
// position and performed once; enqueueing that position again deduplicates.
func requireWireOnce(t *testing.T, api apiClient, bank *fakebank.Bank, token, turnGroup string) {
	t.Helper()
	key := turnGroup + "/d-0/bank.wire/0"
	var effectID string
	require.Eventually(t, func() bool {
		list := api.do("GET", "/v1/effects?connector=bank.wire", token, "")
		effects, _ := list.body["effects"].([]any)
		if len(effects) != 1 {
			return false
		}
		e := effects[0].(map[string]any)
		effectID, _ = e["id"].(string)
		return e["state"] == "CONFIRMED" && e["idempotency_key"] == key
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, bank.Count(key), "dispatched once")
	r := api.do("POST", "/v1/effects", token, `{"connector":"bank.wire","position":{"turn_group":"`+turnGroup+`","decision":0,"call_index":0},"args":{"account":"a-1","amount":30}}`)
	require.Equal(t, http.StatusOK, r.status, "the same journal position deduplicates: %s", r.raw)
	require.Equal(t, effectID, r.body["id"])
	require.Equal(t, 1, bank.Count(key), "still once")
}
