package console_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/console"
	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is a console on its own database, served by a test HTTP server, with an effects client
// (never started: effects stay where the test puts them; its held effects follow the four-eyes
// rule) that knows the connector "bank.wire" (whose confirmation prompt is "Wire {amount} to
// {to}?"), a saga definition "order" of one step, and a turns client.
type harness struct {
	t         *testing.T
	pool      *pgxpool.Pool
	effects   *effects.Client
	sagas     *saga.Client
	turns     *turns.Client
	operators *operator.Store
	server    *httptest.Server
	handler   http.Handler
}

func setup(t *testing.T) *harness {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	h := &harness{t: t, pool: pgtest.NewDB(t)}
	var err error
	h.turns, err = turns.NewClient(h.pool, &turns.Config{Logger: logger, RecoverInterval: -1})
	require.NoError(t, err)
	h.sagas, err = saga.NewClient(h.pool, &saga.Config{Logger: logger})
	require.NoError(t, err)
	require.NoError(t, h.sagas.Register(saga.Definition{Name: "order", Steps: []saga.Step{{
		Name:   "charge",
		Effect: func(saga.Input) (effects.Spec, error) { return effects.Spec{Connector: "bank.wire"}, nil },
		Undo:   saga.NoUndo(),
	}}}))
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(effects.Connector{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch:           func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
		ConfirmationPrompt: "Wire {amount} to {to}?",
	}))
	h.effects = testkit.NewClient(t, h.pool, &effects.Config{
		Registry: registry, Logger: logger, Plugins: []effects.Plugin{h.turns, h.sagas}, FourEyes: true,
	})
	h.operators = operator.NewStore(h.pool)
	c, err := console.New(&console.Config{
		Ops: ops.New(h.pool, h.effects, h.sagas, h.turns), Operators: h.operators, Logger: logger,
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Register(mux)
	h.handler = mux
	h.server = httptest.NewServer(mux)
	t.Cleanup(h.server.Close)
	return h
}

// operator adds an operator and returns its token.
func (h *harness) operator(name string, role operator.Role, tenants ...string) string {
	h.t.Helper()
	token, _, err := h.operators.Add(context.Background(), name, role, tenants)
	require.NoError(h.t, err)
	return token
}

// enqueue records a PENDING effect of tenant.
func (h *harness) enqueue(tenant, key string, spec *effects.Spec) *effects.Effect {
	h.t.Helper()
	s := effects.Spec{TenantID: tenant, Connector: "bank.wire", IdempotencyKey: key, Args: map[string]any{"amount": 100, "to": "acct-7"}}
	if spec != nil {
		s.RunID, s.TurnID = spec.RunID, spec.TurnID
	}
	e, err := h.effects.Enqueue(context.Background(), s, nil)
	require.NoError(h.t, err)
	return e
}

// held records a PENDING effect of tenant awaiting its confirmation, paying to, enqueued by actor
// ("" for the default, "enqueue").
func (h *harness) held(tenant, key, to, actor string) *effects.Effect {
	h.t.Helper()
	e, err := h.effects.Enqueue(context.Background(), effects.Spec{
		TenantID: tenant, Connector: "bank.wire", IdempotencyKey: key, Args: map[string]any{"amount": 250, "to": to},
		RequireConfirmation: true,
	}, &effects.EnqueueOpts{Actor: actor})
	require.NoError(h.t, err)
	require.Equal(h.t, effects.ConfirmationAwaiting, e.Confirmation)
	return e
}

// stuck records an effect of tenant and moves it to STUCK the way a reactor would (PENDING →
// UNKNOWN → STUCK), through the state-machine trigger.
func (h *harness) stuck(tenant, key string) *effects.Effect {
	h.t.Helper()
	e := h.enqueue(tenant, key, nil)
	for _, to := range []string{"UNKNOWN", "STUCK"} {
		tag, err := h.pool.Exec(context.Background(),
			`UPDATE reckon_effects SET state = $2, transition_actor = 'reconcile', transition_reason = 'status check inconclusive' WHERE id = $1`, e.ID, to)
		require.NoError(h.t, err)
		require.EqualValues(h.t, 1, tag.RowsAffected())
	}
	return e
}

// failed enqueues an effect of tenant and fails it, as a permanent rejection would.
func (h *harness) failed(tenant, key string) *effects.Effect {
	h.t.Helper()
	e := h.enqueue(tenant, key, nil)
	tag, err := h.pool.Exec(context.Background(),
		`UPDATE reckon_effects SET state = 'FAILED', error = 'rejected', transition_actor = 'reactor', transition_reason = 'permanent failure' WHERE id = $1`, e.ID)
	require.NoError(h.t, err)
	require.EqualValues(h.t, 1, tag.RowsAffected())
	return e
}

func (h *harness) state(id uuid.UUID) string {
	h.t.Helper()
	var state string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT state FROM reckon_effects WHERE id = $1`, id).Scan(&state))
	return state
}

func (h *harness) transitions() int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, `SELECT count(*) FROM reckon_effect_transitions`)
}

// cookieNamed is the cookie named name that resp sets, or nil.
func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// browser is a cookie-keeping client of the console that does not follow redirects.
type browser struct {
	h      *harness
	client *http.Client
	csrf   string // the session's CSRF token, read from the last page that had a form
}

func (h *harness) browser() *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(h.t, err)
	return &browser{h: h, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// page is an answer of the console.
type page struct {
	status int
	header http.Header
	body   string
}

func (p page) location() string { return p.header.Get("Location") }

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) page {
	b.h.t.Helper()
	resp, err := b.client.Do(req)
	require.NoError(b.h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.h.t, err)
	p := page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if m := csrfRE.FindStringSubmatch(p.body); m != nil {
		b.csrf = html.UnescapeString(m[1])
	}
	return p
}

func (b *browser) get(path string) page {
	b.h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.h.server.URL+path, nil)
	require.NoError(b.h.t, err)
	return b.do(req)
}

// post sends form as a same-origin browser would (Origin, Sec-Fetch-Site), with the session's
// CSRF token unless form has one; headers are extra name, value pairs that override those.
func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.h.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, b.h.server.URL+path, strings.NewReader(form.Encode()))
	require.NoError(b.h.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.h.server.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

// signIn signs in with token through the sign-in form and returns the answer to the form's POST.
func (b *browser) signIn(token string) page {
	b.h.t.Helper()
	form := b.get("/console/sign-in")
	require.Equal(b.h.t, http.StatusOK, form.status, form.body)
	return b.post("/console/sign-in", url.Values{"token": {token}})
}

// signedIn is a browser signed in as a new operator of role and tenants.
func (h *harness) signedIn(name string, role operator.Role, tenants ...string) *browser {
	h.t.Helper()
	b := h.browser()
	p := b.signIn(h.operator(name, role, tenants...))
	require.Equal(h.t, http.StatusSeeOther, p.status, p.body)
	require.Equal(h.t, "/console/", p.location())
	require.Equal(h.t, http.StatusOK, b.get("/console/overview").status) // reads the session's CSRF token
	return b
}
