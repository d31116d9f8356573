package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

// setupSessions is an API server with a turns client that only submits (River never started);
// the test runs turns itself with RunTurn, through the handler that records them.
func setupSessions(t *testing.T) (*harness, *turns.Client) {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t)}
	tc, err := turns.NewClient(h.pool, &turns.Config{
		Handler: turns.HandlerFunc(func(context.Context, *turns.Turn) error { return nil }),
		Logger:  slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	h.client = testkit.NewClient(t, h.pool, &effects.Config{Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Plugins: []effects.Plugin{tc}})
	h.server = h.serve(&api.Config{Pool: h.pool, Effects: h.client, Turns: tc})
	return h, tc
}

type messageAnswer struct {
	Message struct {
		ID        uuid.UUID       `json:"id"`
		MessageID string          `json:"message_id"`
		Content   json.RawMessage `json:"content"`
		At        string          `json:"at"`
	} `json:"message"`
	Turn struct {
		ID        uuid.UUID   `json:"id"`
		Status    string      `json:"status"`
		TurnGroup uuid.UUID   `json:"turn_group"`
		Messages  []uuid.UUID `json:"message_ids"`
	} `json:"turn"`
	Deduplicated bool `json:"deduplicated"`
}

func (r response) message(t *testing.T) messageAnswer { return decode[messageAnswer](t, r) }

// TestSessionsAPI: messages posted within the window join one accumulating turn (202); a repeated
// message id is 200 and records nothing; the turns list shows status, messages and decisions;
// bad requests and other tenants' sessions are refused and change nothing.
func TestSessionsAPI(t *testing.T) {
	t.Parallel()
	h, tc := setupSessions(t)
	acme, globex := h.token("acme", false), h.token("globex", false)
	session := "acme:agent-1:user-7:web"
	path := "/v1/sessions/" + url.PathEscape(session)
	counts := func() [2]int {
		var messages, turnRows int
		require.NoError(t, h.pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM reckon_messages), (SELECT count(*) FROM reckon_turns)`).Scan(&messages, &turnRows))
		return [2]int{messages, turnRows}
	}

	r := h.do("POST", path+"/messages", acme, `{"message_id":"m1","content":{"text":"refund my order"},"at":"2026-11-22T03:00:00Z"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	first := r.message(t)
	require.Equal(t, "m1", first.Message.MessageID)
	require.JSONEq(t, `{"text":"refund my order"}`, string(first.Message.Content))
	require.Equal(t, "2026-11-22T03:00:00Z", first.Message.At)
	require.Equal(t, "ACCUMULATING", first.Turn.Status)
	require.False(t, first.Deduplicated)

	r = h.do("POST", path+"/messages", acme, `{"message_id":"m2","content":"actually, order 9"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	second := r.message(t)
	require.Equal(t, first.Turn.ID, second.Turn.ID, "within the window: the same turn")
	require.Len(t, second.Turn.Messages, 2)

	before := counts()
	r = h.do("POST", path+"/messages", acme, `{"message_id":"m1","content":{"text":"something else"}}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	dup := r.message(t)
	require.True(t, dup.Deduplicated)
	require.Equal(t, first.Message.ID, dup.Message.ID)
	require.JSONEq(t, `{"text":"refund my order"}`, string(dup.Message.Content), "the recorded message")
	require.Equal(t, before, counts(), "a duplicate records nothing")

	// Refused requests change nothing.
	for _, tc := range []struct {
		path, token, body, code string
		status                  int
	}{
		{path + "/messages", globex, `{"message_id":"x"}`, "session_tenant_mismatch", 403},
		{"/v1/sessions/acme:agent-1:web/messages", acme, `{"message_id":"x"}`, "invalid_session_key", 400},
		{"/v1/sessions/acme::u:web/messages", acme, `{"message_id":"x"}`, "invalid_session_key", 400},
		{path + "/messages", acme, `{"content":{}}`, "invalid_request", 400},
		{path + "/messages", acme, `{"message_id":"x","at":"yesterday"}`, "invalid_request", 400},
		{path + "/messages", acme, `{"message_id":"x","colour":"red"}`, "invalid_request", 400},
		{path + "/messages", acme, `{"message_id":"x",`, "invalid_json", 400},
		{path + "/messages", "", `{"message_id":"x"}`, "unauthenticated", 401},
	} {
		r := h.do("POST", tc.path, tc.token, tc.body)
		require.Equal(t, tc.status, r.status, "%s %s: %s", tc.path, tc.body, r.body)
		require.Equal(t, tc.code, r.errorCode(t), "%s", tc.body)
	}
	require.Equal(t, before, counts(), "refused requests record nothing")
	r = h.do("GET", path+"/turns", globex, "")
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "session_tenant_mismatch", r.errorCode(t))
	require.Equal(t, "invalid_parameter", h.do("GET", path+"/turns?limit=0", acme, "").errorCode(t))

	// Idempotency-Key applies as on every POST.
	body := `{"message_id":"m3","content":{}}`
	r = h.do("POST", path+"/messages", acme, body, "Idempotency-Key", "k-1")
	require.Equal(t, http.StatusAccepted, r.status)
	replay := h.do("POST", path+"/messages", acme, body, "Idempotency-Key", "k-1")
	require.Equal(t, http.StatusAccepted, replay.status)
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))

	result, err := tc.RunTurn(context.Background(), session)
	require.NoError(t, err)
	require.Equal(t, first.Turn.ID, result.Turn.ID)

	list := listTurns(t, h, path, acme)
	require.Equal(t, session, list.SessionKey)
	require.Len(t, list.Turns, 1)
	require.Equal(t, "COMPLETE", list.Turns[0].Status)
	require.Len(t, list.Turns[0].Messages, 3)
	require.Equal(t, "m1", list.Turns[0].Messages[0].MessageID)

	r = h.do("POST", path+"/messages", acme, `{"message_id":"m4"}`)
	require.Equal(t, http.StatusAccepted, r.status)
	require.NotEqual(t, first.Turn.ID, r.message(t).Turn.ID, "after the turn ran: a new turn")
	require.JSONEq(t, `{}`, string(r.message(t).Message.Content), "content defaults to {}")

	// Another tenant's sessions are its own.
	other := "/v1/sessions/globex:agent-1:user-7:web"
	require.Equal(t, http.StatusAccepted, h.do("POST", other+"/messages", globex, `{"message_id":"m1"}`).status)
	list = listTurns(t, h, other, globex)
	require.Len(t, list.Turns, 1)
	require.Len(t, list.Turns[0].Messages, 1)
	require.Equal(t, http.StatusForbidden, h.do("GET", other+"/turns", acme, "").status)
}

// TestSessionsNotConfigured: a server without a turns client answers 501.
func TestSessionsNotConfigured(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	r := h.do("POST", "/v1/sessions/acme:a:u:web/messages", h.token("acme", false), `{"message_id":"m1"}`)
	require.Equal(t, http.StatusNotImplemented, r.status)
	require.Equal(t, "not_implemented", r.errorCode(t))
}

// TestTurnHandlersAPI: a tenant's admin tokens set, replace and delete its turn handler, and its
// other tokens only read it; another tenant's is absent; bad input is a 400 that stores nothing.
// (System tokens and the audit: TestTenantAdminsStayInTheirTenant.)
func TestTurnHandlersAPI(t *testing.T) {
	t.Parallel()
	h, _ := setupSessions(t)
	admin, acme, globex := h.token("acme", true), h.token("acme", false), h.token("globex", false)
	path := "/v1/turn-handlers/acme"

	r := h.do("PUT", path, acme, `{"url":"http://127.0.0.1:7000/turns"}`)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "forbidden", r.errorCode(t))
	for body, code := range map[string]string{
		`{"url":"ftp://bot/turns"}`:                        "invalid_turn_handler",
		`{"url":""}`:                                       "invalid_turn_handler",
		`{"url":"http://bot/turns","timeout_ms":-1}`:       "invalid_turn_handler",
		`{"url":"http://bot/turns","timeout_ms":86400000}`: "invalid_turn_handler",
		`{"url":"http://bot/turns","retries":3}`:           "invalid_request",
		`{"url":`:                                          "invalid_json",
	} {
		r := h.do("PUT", path, admin, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		require.Equal(t, code, r.errorCode(t), "%s", body)
	}
	require.Equal(t, http.StatusNotFound, h.do("GET", path, acme, "").status, "nothing stored")
	r = h.do("PUT", "/v1/turn-handlers/nobody", admin, `{"url":"http://bot/turns"}`)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)

	r = h.do("PUT", path, admin, `{"url":"http://127.0.0.1:7000/turns"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = h.do("PUT", path, admin, `{"url":"https://bot.acme.example/turns","timeout_ms":5000}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var got struct {
		Tenant    string `json:"tenant"`
		URL       string `json:"url"`
		TimeoutMs int64  `json:"timeout_ms"`
	}
	r = h.do("GET", path, acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &got))
	require.Equal(t, "acme", got.Tenant)
	require.Equal(t, "https://bot.acme.example/turns", got.URL)
	require.EqualValues(t, 5000, got.TimeoutMs)
	require.Equal(t, http.StatusNotFound, h.do("GET", path, globex, "").status, "another tenant's")
	require.Equal(t, http.StatusOK, h.do("GET", path, admin, "").status)

	require.Equal(t, http.StatusForbidden, h.do("DELETE", path, acme, "").status)
	require.Equal(t, http.StatusOK, h.do("DELETE", path, admin, "").status)
	require.Equal(t, http.StatusNotFound, h.do("DELETE", path, admin, "").status)
	require.Equal(t, http.StatusNotFound, h.do("GET", path, acme, "").status)
}

// turnsList is a session's turns as GET /v1/sessions/{key}/turns lists them.
type turnsList struct {
	SessionKey string `json:"session_key"`
	Turns      []struct {
		ID       uuid.UUID `json:"id"`
		Seq      int       `json:"seq"`
		Status   string    `json:"status"`
		Messages []struct {
			MessageID string `json:"message_id"`
		} `json:"messages"`
	} `json:"turns"`
}

// listTurns lists the turns of the session at path (/v1/sessions/{key}) with token.
func listTurns(t *testing.T, h *harness, path, token string) turnsList {
	t.Helper()
	r := h.do("GET", path+"/turns", token, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var list turnsList
	require.NoError(t, json.Unmarshal(r.body, &list))
	return list
}
