package console_test

import (
	"context"
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
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/console"
	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

func TestSignIn(t *testing.T) {
	t.Parallel()
	h := setup(t)
	token := h.operator("ann", operator.RoleOperator)

	// Without a session every page sends the browser to the sign-in form.
	b := h.browser()
	for _, path := range []string{"/console/", "/console/overview", "/console/effects", "/console/operators", "/console/nope"} {
		p := b.get(path)
		require.Equal(t, http.StatusSeeOther, p.status, path)
		require.Equal(t, "/console/sign-in", p.location(), path)
	}
	require.Equal(t, http.StatusFound, b.get("/").status)
	require.Equal(t, "/console/", b.get("/").location())

	// The form: a labelled token field and a double-submit CSRF cookie on the sign-in path.
	resp, err := b.client.Get(h.server.URL + "/console/sign-in")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	signInCookie := cookieNamed(resp, "reckon_console_sign_in")
	require.NotNil(t, signInCookie)
	require.True(t, signInCookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, signInCookie.SameSite)
	require.Equal(t, "/console/sign-in", signInCookie.Path)

	// A wrong token: 401 and the form again, no session.
	p := b.signIn("rko_wrong")
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Contains(t, p.body, "not valid")
	require.Contains(t, p.body, `<label for="token">`)
	require.Equal(t, http.StatusSeeOther, b.get("/console/overview").status)

	// The form's CSRF token missing or not the cookie's: 403, no session.
	b.get("/console/sign-in")
	p = b.post("/console/sign-in", url.Values{"token": {token}, "csrf": {"forged"}})
	require.Equal(t, http.StatusForbidden, p.status)
	fresh := h.browser()
	p = fresh.post("/console/sign-in", url.Values{"token": {token}, "csrf": {""}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Equal(t, http.StatusSeeOther, fresh.get("/console/overview").status)
	// From another origin: 403.
	b.get("/console/sign-in")
	p = b.post("/console/sign-in", url.Values{"token": {token}}, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, p.status)

	// The right token: a session cookie with the attributes the console promises.
	b.get("/console/sign-in")
	form := url.Values{"token": {token}, "csrf": {b.csrf}}
	req, err := http.NewRequest(http.MethodPost, h.server.URL+"/console/sign-in", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	before := time.Now()
	resp, err = b.client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	session := cookieNamed(resp, "reckon_console")
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.False(t, session.Secure, "plain HTTP")
	require.Equal(t, http.SameSiteStrictMode, session.SameSite)
	require.Equal(t, "/console", session.Path)
	require.WithinDuration(t, before.Add(12*time.Hour), session.Expires, time.Minute)
	p = b.get("/console/overview")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "<strong>ann</strong> · operator · all tenants")
	require.Equal(t, http.StatusSeeOther, b.get("/console/sign-in").status, "signed in: the form sends to the console")

	// Signing out ends the session.
	p = b.post("/console/sign-out", url.Values{})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/sign-in", p.location())
	other := h.browser()
	other.client.Jar.SetCookies(mustURL(t, h.server.URL+"/console"), []*http.Cookie{{Name: "reckon_console", Value: session.Value}})
	require.Equal(t, http.StatusSeeOther, other.get("/console/overview").status, "the old cookie no longer works")

	// A revoked operator's token no longer signs in, and its sessions end.
	c := h.browser()
	require.Equal(t, http.StatusSeeOther, c.signIn(token).status)
	require.Equal(t, http.StatusOK, c.get("/console/overview").status)
	_, err = h.operators.Revoke(context.Background(), "ann")
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, c.get("/console/overview").status)
	require.Equal(t, http.StatusUnauthorized, h.browser().signIn(token).status)
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := h.signedIn("ann", operator.RoleViewer)
	_, err := h.pool.Exec(context.Background(), `UPDATE reckon_operator_sessions SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	p := b.get("/console/overview")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/sign-in", p.location())
}

func TestSecureCookieUnderTLS(t *testing.T) {
	t.Parallel()
	h := setup(t)
	token := h.operator("ann", operator.RoleViewer)
	tlsServer := httptestTLS(t, h)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := tlsServer.Client()
	client.Jar = jar
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b := &browser{h: &harness{t: t, server: tlsServer}, client: client}
	p := b.signIn(token)
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	cookies := strings.Join(p.header.Values("Set-Cookie"), "\n")
	require.Regexp(t, `reckon_console=[^;]+;.*Secure`, cookies)
}

// TestSecureCookiesBehindProxy: with Config.SecureCookies every cookie the console sets or clears
// is Secure though the request came over plain HTTP (TLS ended at a proxy), and a form posted from
// the proxy's https:// origin of the same host is accepted.
func TestSecureCookiesBehindProxy(t *testing.T) {
	t.Parallel()
	h := setup(t)
	token := h.operator("ann", operator.RoleViewer)
	c, err := console.New(&console.Config{
		Ops: ops.New(h.pool, h.effects, h.sagas, h.turns), Operators: h.operators, Logger: slog.New(slog.DiscardHandler),
		SecureCookies: true,
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Register(mux)
	server := httptest.NewServer(mux)
	t.Cleanup(server.Close)
	// No cookie jar: Go's, like a browser, keeps Secure cookies from plain HTTP. Behind the proxy
	// the browser speaks HTTPS and sends them; the test sends them itself.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, form url.Values, cookies ...*http.Cookie) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, server.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", "https://"+req.Host)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		for _, cookie := range cookies {
			req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp, string(body)
	}
	cookie := func(resp *http.Response, name string) *http.Cookie {
		t.Helper()
		c := cookieNamed(resp, name)
		require.NotNil(t, c, "no %s cookie in %v", name, resp.Header.Values("Set-Cookie"))
		require.True(t, c.Secure, "%s is Secure over plain HTTP", name)
		require.True(t, c.HttpOnly, name)
		return c
	}

	resp, body := send(http.MethodGet, "/console/sign-in", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	signInForm := cookie(resp, "reckon_console_sign_in")
	csrf := regexpFind(t, `name="csrf" value="([^"]+)"`, body)

	resp, body = send(http.MethodPost, "/console/sign-in", url.Values{"token": {token}, "csrf": {csrf}}, signInForm)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the https:// origin of this host is accepted: %s", body)
	session := cookie(resp, "reckon_console")
	require.Negative(t, cookie(resp, "reckon_console_sign_in").MaxAge, "the form's cookie is cleared, Secure")

	resp, body = send(http.MethodGet, "/console/overview", nil, session)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	csrf = regexpFind(t, `name="csrf" value="([^"]+)"`, body)
	resp, body = send(http.MethodPost, "/console/sign-out", url.Values{"csrf": {csrf}}, session)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Negative(t, cookie(resp, "reckon_console").MaxAge, "the session cookie is cleared, Secure")
}

func httptestTLS(t *testing.T, h *harness) *httptest.Server {
	t.Helper()
	server := httptest.NewTLSServer(h.handler)
	t.Cleanup(server.Close)
	return server
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

func regexpFind(t *testing.T, pattern, text string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	require.NotNil(t, m, "%s in %s", pattern, text)
	return html.UnescapeString(m[1])
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := h.signedIn("ann", operator.RoleAdmin)
	for _, path := range []string{"/console/sign-in", "/console/overview", "/console/effects/" + uuid.NewString(), "/console/static/console.css"} {
		resp, err := b.client.Get(h.server.URL + path)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'self'", path)
		require.Contains(t, csp, "style-src 'self'", path)
		require.Contains(t, csp, "frame-ancestors 'none'", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		require.Equal(t, "same-origin", resp.Header.Get("Referrer-Policy"), path)
		if !strings.HasPrefix(path, "/console/static/") {
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), path)
		}
	}
	p := b.get("/console/static/console.css")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.header.Get("Content-Type"), "text/css")
	p = b.get("/console/overview")
	require.NotContains(t, p.body, "<script")
	require.NotContains(t, p.body, "style=")
	require.Contains(t, p.body, `<a class="skip" href="#main">`)
}

// An operator resolves a STUCK effect from its page; the audit trail names it, and the page shows
// the decision.
func TestResolveRecordsTheOperator(t *testing.T) {
	t.Parallel()
	h := setup(t)
	e := h.stuck("acme", "wire-1")
	b := h.signedIn("ann", operator.RoleOperator)

	// The landing page is the STUCK queue, which shows the evidence and the form.
	p := b.get("/console/")
	require.Equal(t, "/console/stuck", p.location())
	p = b.get("/console/stuck")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, e.ID.String())
	require.Contains(t, p.body, "status check inconclusive")
	require.Contains(t, p.body, `action="/console/effects/`+e.ID.String()+`/resolve"`)

	p = b.get("/console/effects/" + e.ID.String())
	require.Equal(t, http.StatusOK, p.status)
	for _, want := range []string{`&#34;amount&#34;: 100`, "wire-1", "reconcile", "status check inconclusive", `<label for="reason-` + e.ID.String() + `">`,
		`name="to" value="CONFIRMED"`, `name="to" value="FAILED"`, `name="to" value="PENDING"`} {
		require.Contains(t, p.body, want)
	}

	p = b.post("/console/effects/"+e.ID.String()+"/resolve", url.Values{"to": {"CONFIRMED"}, "reason": {"bank ledger shows the wire"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "/console/effects/"+e.ID.String()+"?done=resolved", p.location())
	require.Equal(t, "CONFIRMED", h.state(e.ID))
	var actor, reason string
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT actor, reason FROM reckon_effect_transitions WHERE effect_id = $1 ORDER BY id DESC LIMIT 1`, e.ID).Scan(&actor, &reason))
	require.Equal(t, "operator:console:ann", actor)
	require.Equal(t, "bank ledger shows the wire", reason)

	p = b.get(p.location())
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "operator:console:ann")
	require.Contains(t, p.body, "bank ledger shows the wire")
	require.NotContains(t, p.body, "/resolve\"", "no resolve form once settled")

	// Resolving again: 409, nothing more recorded.
	before := h.transitions()
	p = b.post("/console/effects/"+e.ID.String()+"/resolve", url.Values{"to": {"FAILED"}, "reason": {"again"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Equal(t, before, h.transitions())

	// Now nothing is STUCK: the landing page is the overview.
	require.Equal(t, "/console/overview", b.get("/console/").location())
}

// Cancel fails a PENDING effect that was never attempted.
func TestCancel(t *testing.T) {
	t.Parallel()
	h := setup(t)
	e := h.enqueue("acme", "wire-1", nil)
	b := h.signedIn("ann", operator.RoleOperator)
	require.Contains(t, b.get("/console/effects/"+e.ID.String()).body, "/cancel\"")
	p := b.post("/console/effects/"+e.ID.String()+"/cancel", url.Values{"reason": {"customer withdrew"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "FAILED", h.state(e.ID))
	require.Contains(t, b.get(p.location()).body, "operator:console:ann")
}

// Without the session's CSRF token, with a wrong one, or from another site a form is refused, and
// nothing changes.
func TestCSRF(t *testing.T) {
	t.Parallel()
	h := setup(t)
	e := h.stuck("acme", "wire-1")
	b := h.signedIn("ann", operator.RoleAdmin)
	path := "/console/effects/" + e.ID.String() + "/resolve"
	form := func(csrf string) url.Values {
		return url.Values{"to": {"FAILED"}, "reason": {"forged"}, "csrf": {csrf}}
	}
	before := h.transitions()
	for name, p := range map[string]page{
		"missing":    b.post(path, url.Values{"to": {"FAILED"}, "reason": {"forged"}, "csrf": nil}),
		"empty":      b.post(path, form("")),
		"wrong":      b.post(path, form("not-the-token")),
		"cross-site": b.post(path, form(b.csrf), "Sec-Fetch-Site", "cross-site"),
		"origin":     b.post(path, form(b.csrf), "Origin", "https://evil.example"),
		"null":       b.post(path, form(b.csrf), "Origin", "null"),
	} {
		require.Equal(t, http.StatusForbidden, p.status, name)
	}
	// Another session's token is no good either.
	other := h.signedIn("bob", operator.RoleAdmin)
	require.Equal(t, http.StatusForbidden, b.post(path, form(other.csrf)).status)
	require.Equal(t, http.StatusForbidden, b.post("/console/operators/bob/revoke", form("wrong")).status)
	require.Equal(t, http.StatusForbidden, b.post("/console/sign-out", form("wrong")).status)

	require.Equal(t, "STUCK", h.state(e.ID))
	require.Equal(t, before, h.transitions())
	require.Equal(t, http.StatusOK, other.get("/console/overview").status, "bob is not revoked")
	require.Equal(t, http.StatusOK, b.get("/console/overview").status, "ann is still signed in")
}

// A viewer sees no action and its forged actions are 403; nothing changes.
func TestViewerCannotAct(t *testing.T) {
	t.Parallel()
	h := setup(t)
	e := h.stuck("acme", "wire-1")
	pending := h.enqueue("acme", "wire-2", nil)
	h.enqueue("acme", "run-1/a", &effects.Spec{RunID: "run-1"})
	b := h.signedIn("vic", operator.RoleViewer)

	for _, path := range []string{"/console/stuck", "/console/effects/" + e.ID.String(), "/console/effects/" + pending.ID.String(), "/console/runs/acme/run-1"} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status, path)
		require.Contains(t, p.body, "STUCK", path)
		require.NotContains(t, p.body, `method="post" action="/console/effects`, path)
		require.NotContains(t, p.body, `/cancel"`, path)
		require.NotContains(t, p.body, "Preview", path)
	}
	require.Equal(t, http.StatusForbidden, b.get("/console/bulk?state=STUCK&to=FAILED").status)
	require.Equal(t, http.StatusForbidden, b.get("/console/operators").status)

	before := h.transitions()
	for _, post := range []struct {
		path string
		form url.Values
	}{
		{"/console/effects/" + e.ID.String() + "/resolve", url.Values{"to": {"FAILED"}, "reason": {"x"}}},
		{"/console/effects/" + pending.ID.String() + "/cancel", url.Values{"reason": {"x"}}},
		{"/console/bulk", url.Values{"to": {"FAILED"}, "reason": {"x"}, "id": {e.ID.String()}}},
		{"/console/runs/acme/run-1/cancel", url.Values{"reason": {"x"}}},
		{"/console/operators/vic/revoke", url.Values{}},
	} {
		require.Equal(t, http.StatusForbidden, b.post(post.path, post.form).status, post.path)
	}
	require.Equal(t, "STUCK", h.state(e.ID))
	require.Equal(t, "PENDING", h.state(pending.ID))
	require.Equal(t, before, h.transitions())
	require.Equal(t, 0, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_runs WHERE cancelled_at IS NOT NULL`))
	require.Equal(t, http.StatusOK, b.get("/console/overview").status, "still signed in, not revoked")
}

// A scoped operator never sees another tenant's effects, sagas, runs or sessions.
func TestScopedOperator(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	mine := h.stuck("acme", "wire-acme")
	theirs := h.stuck("globex", "wire-globex")
	h.enqueue("globex", "run-g/1", &effects.Spec{RunID: "run-g"})
	h.enqueue("acme", "run-a/1", &effects.Spec{RunID: "run-a"})
	theirSaga, err := h.sagas.Start(ctx, "order", map[string]any{"n": 1}, &saga.StartOpts{TenantID: "globex"})
	require.NoError(t, err)
	mySaga, err := h.sagas.Start(ctx, "order", map[string]any{"n": 2}, &saga.StartOpts{TenantID: "acme"})
	require.NoError(t, err)
	_, err = h.turns.Submit(ctx, turns.Inbound{SessionKey: "globex:agent:bob:chat", Content: map[string]string{"text": "hi"}})
	require.NoError(t, err)
	_, err = h.turns.Submit(ctx, turns.Inbound{SessionKey: "acme:agent:ann:chat", Content: map[string]string{"text": "hello"}})
	require.NoError(t, err)

	b := h.signedIn("ann", operator.RoleOperator, "acme")
	for _, path := range []string{
		"/console/effects/" + theirs.ID.String(),
		"/console/sagas/" + theirSaga.ID.String(),
		"/console/runs/globex/run-g",
		"/console/sessions/" + url.PathEscape("globex:agent:bob:chat"),
	} {
		p := b.get(path)
		require.Equal(t, http.StatusNotFound, p.status, path)
		require.NotContains(t, p.body, "globex", path)
	}
	for _, path := range []string{
		"/console/effects/" + mine.ID.String(),
		"/console/sagas/" + mySaga.ID.String(),
		"/console/runs/acme/run-a",
		"/console/sessions/" + url.PathEscape("acme:agent:ann:chat"),
	} {
		require.Equal(t, http.StatusOK, b.get(path).status, path)
	}
	for _, path := range []string{"/console/overview", "/console/stuck", "/console/effects", "/console/effects?state=STUCK",
		"/console/sagas", "/console/runs", "/console/sessions", "/console/connectors"} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status, path)
		require.NotContains(t, p.body, "globex", path)
		require.NotContains(t, p.body, theirs.ID.String(), path)
	}
	require.Contains(t, b.get("/console/effects").body, mine.ID.String())
	require.Contains(t, b.get("/console/stuck").body, mine.ID.String())

	// Acting on another tenant's effect or run is 404 and changes nothing.
	before := h.transitions()
	p := b.post("/console/effects/"+theirs.ID.String()+"/resolve", url.Values{"to": {"FAILED"}, "reason": {"x"}})
	require.Equal(t, http.StatusNotFound, p.status)
	require.Equal(t, http.StatusNotFound, b.post("/console/runs/globex/run-g/cancel", url.Values{"reason": {"x"}}).status)
	// A bulk confirmation naming it skips it.
	p = b.post("/console/bulk", url.Values{"to": {"FAILED"}, "reason": {"x"}, "id": {theirs.ID.String()}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, "STUCK", h.state(theirs.ID))
	require.Equal(t, before, h.transitions())
	require.Equal(t, 0, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_runs WHERE cancelled_at IS NOT NULL`))
}

// Bulk resolve: the preview lists the STUCK effects the filter matches; the confirmation resolves
// exactly those still STUCK and says which it skipped.
func TestBulkResolve(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var stuck []*effects.Effect
	for i := range 3 {
		stuck = append(stuck, h.stuck("acme", "wire-"+string(rune('a'+i))))
	}
	other := h.stuck("globex", "wire-g")
	pending := h.enqueue("acme", "wire-p", nil)
	b := h.signedIn("ann", operator.RoleOperator)

	p := b.get("/console/bulk?tenant=acme&state=STUCK&to=FAILED")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "These <strong>3</strong> STUCK effects will be resolved")
	for _, e := range stuck {
		require.Contains(t, p.body, `name="id" value="`+e.ID.String()+`"`)
		// What each one is, before confirming: its tenant, connector and key, and since when.
		require.Contains(t, p.body, "<code>"+e.IdempotencyKey+"</code>")
	}
	require.Contains(t, p.body, "<th scope=\"col\">STUCK for</th>")
	require.Contains(t, p.body, "<td>acme</td><td>"+stuck[0].Connector+"</td>")
	require.NotContains(t, p.body, other.ID.String())
	require.NotContains(t, p.body, pending.ID.String())
	require.Contains(t, p.body, `<label for="bulk-reason">`)
	// Bulk actions are for STUCK effects only.
	require.Equal(t, http.StatusBadRequest, b.get("/console/bulk?state=PENDING&to=FAILED").status)

	// Meanwhile one of them is resolved on its own.
	p = b.post("/console/effects/"+stuck[0].ID.String()+"/resolve", url.Values{"to": {"CONFIRMED"}, "reason": {"found it"}})
	require.Equal(t, http.StatusSeeOther, p.status)

	form := url.Values{"to": {"FAILED"}, "reason": {"bank says none of these happened"}}
	for _, e := range stuck {
		form.Add("id", e.ID.String())
	}
	p = b.post("/console/bulk", form)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "<strong>2</strong> effects resolved")
	require.Contains(t, p.body, "<strong>1</strong> skipped")
	require.Equal(t, "CONFIRMED", h.state(stuck[0].ID))
	for _, e := range stuck[1:] {
		require.Equal(t, "FAILED", h.state(e.ID))
		var actor string
		require.NoError(t, h.pool.QueryRow(context.Background(),
			`SELECT actor FROM reckon_effect_transitions WHERE effect_id = $1 ORDER BY id DESC LIMIT 1`, e.ID).Scan(&actor))
		require.Equal(t, "operator:console:ann", actor)
	}
	require.Equal(t, "STUCK", h.state(other.ID))
	require.Equal(t, "PENDING", h.state(pending.ID))
}

// Bad input is a 400 page naming the field, and changes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	e := h.stuck("acme", "wire-1")
	b := h.signedIn("ann", operator.RoleAdmin)
	long := strings.Repeat("x", 5000)
	for path, field := range map[string]string{
		"/console/effects?state=MAYBE":                   "state",
		"/console/effects?created_after=yesterday":       "created_after",
		"/console/effects?created_before=2026-13-01":     "created_before",
		"/console/effects?turn=not-a-uuid":               "turn",
		"/console/effects?limit=-4":                      "limit",
		"/console/effects?connector=%00":                 "connector",
		"/console/effects?idempotency_key=%ff%fe":        "idempotency_key",
		"/console/effects?business_key=" + long:          "business_key",
		"/console/effects?after=%%%":                     "",
		"/console/effects/not-a-uuid":                    "id",
		"/console/effects/%00":                           "id",
		"/console/sagas/123":                             "id",
		"/console/sagas?state=SIDEWAYS":                  "state",
		"/console/runs?tenant=" + url.QueryEscape("a b"): "tenant",
		"/console/sessions/%ff":                          "session",
		"/console/bulk?state=STUCK&to=LATER":             "to",
	} {
		p := b.get(path)
		require.Equal(t, http.StatusBadRequest, p.status, "%s: %s", path, p.body)
		if field != "" {
			require.Contains(t, p.body, "<strong>"+field+"</strong>", path)
		}
	}
	before := h.transitions()
	resolve := "/console/effects/" + e.ID.String() + "/resolve"
	for name, c := range map[string]struct {
		form  url.Values
		field string
	}{
		"bad to":       {url.Values{"to": {"MAYBE"}, "reason": {"x"}}, "to"},
		"no reason":    {url.Values{"to": {"FAILED"}}, "reason"},
		"blank reason": {url.Values{"to": {"FAILED"}, "reason": {"   "}}, "reason"},
		"long reason":  {url.Values{"to": {"FAILED"}, "reason": {strings.Repeat("x", 1001)}}, "reason"},
		"NUL reason":   {url.Values{"to": {"FAILED"}, "reason": {"a\x00b"}}, "reason"},
		"bad UTF-8":    {url.Values{"to": {"FAILED"}, "reason": {"\xff"}}, "reason"},
	} {
		p := b.post(resolve, c.form)
		require.Equal(t, http.StatusBadRequest, p.status, "%s: %s", name, p.body)
		require.Contains(t, p.body, "<strong>"+c.field+"</strong>", name)
	}
	p := b.post("/console/effects/nope/resolve", url.Values{"to": {"FAILED"}, "reason": {"x"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	p = b.post("/console/bulk", url.Values{"to": {"FAILED"}, "reason": {"x"}, "id": {"nope"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "<strong>id</strong>")
	require.Equal(t, "STUCK", h.state(e.ID))
	require.Equal(t, before, h.transitions())
	require.Equal(t, http.StatusNotFound, b.get("/console/effects/"+uuid.NewString()).status)
}

// Every page renders for an admin, with something on it.
func TestEveryPageRenders(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	e := h.stuck("acme", "wire-1")
	held := h.held("acme", "refund-1", "acct-1", "")
	turnID := uuid.New()
	h.enqueue("acme", "run-1/a", &effects.Spec{RunID: "run-1", TurnID: &turnID})
	s, err := h.sagas.Start(ctx, "order", map[string]any{"n": 1}, &saga.StartOpts{TenantID: "acme"})
	require.NoError(t, err)
	_, err = h.turns.Submit(ctx, turns.Inbound{SessionKey: "acme:agent:ann:chat", Content: map[string]string{"text": "hello"}})
	require.NoError(t, err)
	b := h.signedIn("root", operator.RoleAdmin)
	h.operator("vic", operator.RoleViewer, "acme", "globex")

	pages := map[string]string{
		"/console/overview": "Settled per minute",
		"/console/stuck":    e.ID.String(),
		"/console/awaiting": held.ID.String(),
		"/console/effects":  e.ID.String()[24:],
		"/console/effects?state=STUCK&tenant=acme&connector=bank.wire&idempotency_key=wire-1&created_after=2000-01-01T00:00:00Z&limit=10": "wire-1",
		"/console/effects?turn=" + turnID.String():                   "run-1/a",
		"/console/effects/" + e.ID.String():                          "Timeline",
		"/console/bulk?state=STUCK":                                  "Preview",
		"/console/bulk?state=STUCK&to=PENDING":                       e.ID.String(),
		"/console/sagas":                                             s.ID.String()[24:],
		"/console/sagas/" + s.ID.String():                            "Compensation order",
		"/console/runs":                                              "run-1",
		"/console/runs/acme/run-1":                                   "Guardrails",
		"/console/sessions":                                          "acme:agent:ann:chat",
		"/console/sessions/" + url.PathEscape("acme:agent:ann:chat"): "Accumulating messages",
		"/console/connectors":                                        "bank.wire",
		"/console/operators":                                         "vic",
	}
	for path, want := range pages {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status, "%s: %s", path, p.body)
		require.Contains(t, p.body, want, path)
		require.Equal(t, "text/html; charset=utf-8", p.header.Get("Content-Type"), path)
	}
	// The effects page carries its cursor in a "Next page" link that works.
	h.enqueue("acme", "wire-2", nil)
	p := b.get("/console/effects?limit=1")
	require.Contains(t, p.body, `rel="next"`)
	next := regexpFind(t, `href="([^"]+)" rel="next"`, p.body)
	p = b.get(next)
	require.Equal(t, http.StatusOK, p.status, p.body)

	// Admins revoke operators from the console.
	p = b.post("/console/operators/vic/revoke", url.Values{})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	list, err := h.operators.List(ctx)
	require.NoError(t, err)
	for _, op := range list {
		if op.Name == "vic" {
			require.NotNil(t, op.RevokedAt)
		}
	}
}
