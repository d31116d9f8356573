package httpturn_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
	"github.com/reckonhq/reckon/turns/httpturn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// endpoint is a team's turn handler: a real HTTP server on 127.0.0.1 that records the turns it
// gets and answers with answer (set by the test).
type endpoint struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	requests []httpturn.Request
	headers  []http.Header
	answer   func(w http.ResponseWriter, req httpturn.Request)
	arrived  chan httpturn.Request
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{t: t, arrived: make(chan httpturn.Request, 16)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var req httpturn.Request
		if err := json.Unmarshal(raw, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.requests = append(e.requests, req)
		e.headers = append(e.headers, r.Header.Clone())
		answer := e.answer
		e.mu.Unlock()
		e.arrived <- req
		answer(w, req)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) set(answer func(w http.ResponseWriter, req httpturn.Request)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = answer
}

func reply(status int, body string) func(w http.ResponseWriter, _ httpturn.Request) {
	return func(w http.ResponseWriter, _ httpturn.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

type harness struct {
	t    *testing.T
	pool *pgxpool.Pool
	tc   *turns.Client
	ec   *effects.Client
}

// setup: turns and effects clients (River not started) whose handler calls url.
func setup(t *testing.T, url string, timeout time.Duration) *harness {
	t.Helper()
	h := &harness{t: t, pool: pgtest.NewDB(t)}
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(effects.Connector{
		Name: "bank.refund", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Absent(), nil
		},
	}))
	require.NoError(t, registry.Register(effects.Connector{
		Name: "notes.write", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	}))
	handler, err := httpturn.New(httpturn.Config{URL: url, Registry: registry, Timeout: timeout})
	require.NoError(t, err)
	h.tc, err = turns.NewClient(h.pool, &turns.Config{Handler: handler, Logger: slog.New(slog.DiscardHandler), MaxAttempts: 3})
	require.NoError(t, err)
	h.ec, err = effects.NewClient(h.pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler), Plugins: []effects.Plugin{h.tc}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.ec.Stop(context.Background())) })
	return h
}

func (h *harness) submit(session, id string, at *time.Time) {
	h.t.Helper()
	_, err := h.tc.Submit(context.Background(), turns.Inbound{SessionKey: session, MessageID: id, Content: map[string]string{"text": id}, SentAt: at})
	require.NoError(h.t, err)
}

// turnOutcome is what a RunTurn returned.
type turnOutcome struct {
	result *turns.Result
	err    error
}

// runTurn runs session's turn in a goroutine of its own, and delivers what RunTurn returned once it
// returns.
func (h *harness) runTurn(session string) <-chan turnOutcome {
	done := make(chan turnOutcome, 1)
	go func() {
		result, err := h.tc.RunTurn(context.Background(), session)
		done <- turnOutcome{result, err}
	}()
	return done
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, sql, args...)
}

func newSession() string {
	return turns.SessionKey("acme", "agent-1", "user-"+uuid.NewString()[:8], "web")
}

// The endpoint gets the logical turn; the effects it answers are committed with the turn at their
// journal positions of the turn group, with their business keys.
func TestAnsweredEffectsAreCommittedAtTheirPositions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEndpoint(t)
	e.set(reply(200, `{"effects":[
		{"connector":"bank.refund","args":{"amount":42},"decision":0,"call_index":0,"business_key":"order-9"},
		{"connector":"notes.write","decision":1,"call_index":2}]}`))
	h := setup(t, e.srv.URL, 0)
	session := newSession()
	sent := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	h.submit(session, "m1", &sent)
	h.submit(session, "m2", nil)

	result, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, result.Turn.Status)
	require.Len(t, result.Effects, 2)
	group := result.Turn.Group.String()
	require.Equal(t, group+"/d-0/bank.refund/0", result.Effects[0].IdempotencyKey)
	require.Equal(t, "order-9", result.Effects[0].BusinessKey)
	require.JSONEq(t, `{"amount":42}`, string(result.Effects[0].Args))
	require.Equal(t, group+"/d-1/notes.write/2", result.Effects[1].IdempotencyKey)
	require.JSONEq(t, `{}`, string(result.Effects[1].Args))
	require.Equal(t, "acme", result.Effects[0].TenantID)

	require.Len(t, e.requests, 1)
	req := e.requests[0]
	require.Equal(t, session, req.SessionKey)
	require.Equal(t, "acme", req.Tenant)
	require.Equal(t, "web", req.Channel)
	require.Equal(t, result.Turn.ID, req.TurnID)
	require.Equal(t, result.Turn.Group, req.TurnGroup)
	require.Equal(t, 1, req.Attempt)
	require.Len(t, req.Messages, 2)
	require.Equal(t, "m1", req.Messages[0].MessageID)
	require.JSONEq(t, `{"text":"m1"}`, string(req.Messages[0].Content))
	require.True(t, sent.Equal(*req.Messages[0].SentAt))
	require.Nil(t, req.Messages[1].SentAt)
	require.Equal(t, result.Turn.ID.String(), e.headers[0].Get("Reckon-Turn-Id"))
	require.Equal(t, "1", e.headers[0].Get("Reckon-Attempt"))
	require.Equal(t, "application/json", e.headers[0].Get("Content-Type"))
}

// 4xx (but 408, 425, 429) and invalid answers fail the turn for good with the reason; 5xx, 429,
// timeouts, refused connections and unknown connectors leave it to be attempted again, and the
// next attempt (same turn group) commits.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	ok := `{"effects":[{"connector":"notes.write","decision":0,"call_index":0}]}`
	tooManyEffects := `{"effects":[` + strings.Repeat(`{"connector":"notes.write","decision":0,"call_index":0},`, httpturn.MaxEffects) +
		`{"connector":"notes.write","decision":0,"call_index":1}]}`
	for _, tc := range []struct {
		name      string
		answer    func(w http.ResponseWriter, req httpturn.Request)
		url       string
		permanent bool
		reason    string
	}{
		{name: "422", answer: reply(422, `{"error":"unknown customer"}`), permanent: true, reason: `answered 422: {"error":"unknown customer"}`},
		{name: "404", answer: reply(404, ``), permanent: true, reason: "answered 404: (empty body)"},
		{name: "invalid body", answer: reply(200, `{"effects":[{"connector":"notes.write"}]}`), permanent: true, reason: "decision and call_index are required"},
		{name: "unknown field", answer: reply(200, `{"effect":[]}`), permanent: true, reason: "invalid body"},
		{name: "too many effects", answer: reply(200, tooManyEffects), permanent: true, reason: "effects: 1001 answered, at most 1000"},
		{name: "args not an object", answer: reply(200, `{"effects":[{"connector":"notes.write","decision":0,"call_index":0,"args":[1]}]}`), permanent: true, reason: "args must be a JSON object"},
		{name: "500", answer: reply(500, `oops`), reason: "answered 500: oops"},
		{name: "429", answer: reply(429, ``), reason: "answered 429"},
		{name: "unknown connector", answer: reply(200, `{"effects":[{"connector":"nowhere","decision":0,"call_index":0}]}`), reason: "unknown connector"},
		{name: "timeout", answer: func(w http.ResponseWriter, r httpturn.Request) { time.Sleep(time.Second) }, reason: "deadline exceeded"},
		{name: "connection refused", url: closedURL, reason: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEndpoint(t)
			e.set(tc.answer)
			url := e.srv.URL
			if tc.url != "" {
				url = tc.url
			}
			h := setup(t, url, 300*time.Millisecond)
			session := newSession()
			h.submit(session, "m1", nil)
			result, err := h.tc.RunTurn(ctx, session)
			require.ErrorContains(t, err, tc.reason)
			if tc.permanent {
				require.ErrorIs(t, err, turns.ErrTurnFailed)
				require.Equal(t, turns.StatusFailed, result.Turn.Status)
				require.Contains(t, result.Turn.StatusReason, tc.reason)
				_, err = h.tc.RunTurn(ctx, session)
				require.ErrorIs(t, err, turns.ErrNoTurn, "not attempted again")
				require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))
				return
			}
			require.NotErrorIs(t, err, turns.ErrTurnFailed)
			records, err := h.tc.List(ctx, session)
			require.NoError(t, err)
			require.Equal(t, turns.StatusProcessing, records[0].Status, "left for another attempt")
			require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))

			if tc.url != "" {
				return // nothing listens there
			}
			e.set(reply(200, ok))
			result, err = h.tc.RunTurn(ctx, session)
			require.NoError(t, err)
			require.Equal(t, turns.StatusComplete, result.Turn.Status)
			require.Equal(t, 2, result.Turn.Attempt)
			require.Equal(t, records[0].Group, result.Turn.Group)
			require.Len(t, result.Effects, 1)
			require.Equal(t, records[0].Group.String()+"/d-0/notes.write/0", result.Effects[0].IdempotencyKey)
		})
	}
}

// Without a URL the handler is not ready: the turn waits, untouched.
func TestNoURLIsNotReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, "", 0)
	session := newSession()
	h.submit(session, "m1", nil)
	_, err := h.tc.RunTurn(ctx, session)
	require.ErrorIs(t, err, turns.ErrNotReady)
	require.ErrorContains(t, err, "RECKON_TURN_HANDLER_URL")
	records, err := h.tc.List(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusAccumulating, records[0].Status)

	_, err = httpturn.New(httpturn.Config{URL: "ftp://x", Registry: effects.NewRegistry()})
	require.ErrorContains(t, err, "http")
	_, err = httpturn.New(httpturn.Config{URL: "http://127.0.0.1:1/"})
	require.ErrorContains(t, err, "Registry")
}

// A message that arrives while the endpoint decides an irreversible effect supersedes the turn
// (default decider): nothing is enqueued; the next turn of the same group gets every message and
// its answer at the same position is the one effect.
func TestMessageBeforeIrreversibleSupersedes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEndpoint(t)
	release := make(chan struct{})
	answer := `{"effects":[{"connector":"bank.refund","args":{"amount":5},"decision":0,"call_index":0}]}`
	e.set(func(w http.ResponseWriter, req httpturn.Request) {
		if len(req.Messages) == 1 {
			<-release
		}
		reply(200, answer)(w, req)
	})
	h := setup(t, e.srv.URL, 10*time.Second)
	session := newSession()
	h.submit(session, "m1", nil)

	first := h.runTurn(session)
	<-e.arrived
	h.submit(session, "m2", nil)
	close(release)
	got := <-first
	require.NoError(t, got.err)
	require.Equal(t, turns.StatusSuperseded, got.result.Turn.Status)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`), "nothing enqueued by the superseded turn")

	second, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, second.Turn.Status)
	require.Equal(t, got.result.Turn.Group, second.Turn.Group, "the superseding turn inherits the group")
	req := <-e.arrived
	require.Len(t, req.Messages, 2)
	require.Len(t, second.Effects, 1)
	require.Equal(t, got.result.Turn.Group.String()+"/d-0/bank.refund/0", second.Effects[0].IdempotencyKey)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turn_decisions WHERE action = 'SUPERSEDE'`))
}
