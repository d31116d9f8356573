package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// consoleTab is one signed-in (or signing-in) browser tab on the console.
type consoleTab struct {
	t     *testing.T
	ctx   context.Context
	base  string // the server's http://host:port
	shots string // the screenshots' directory
}

func (c consoleTab) run(actions ...chromedp.Action) {
	c.t.Helper()
	require.NoError(c.t, chromedp.Run(c.ctx, actions...))
}

// visit navigates to path and returns the HTTP status of the page it lands on (after redirects).
func (c consoleTab) visit(path string) int64 {
	c.t.Helper()
	resp, err := chromedp.RunResponse(c.ctx, chromedp.Navigate(c.base+path))
	require.NoError(c.t, err, path)
	return resp.Status
}

// open navigates to path, requires a 200 page, and saves its screenshot as shot (if not empty).
func (c consoleTab) open(path, shot string) {
	c.t.Helper()
	require.EqualValues(c.t, http.StatusOK, c.visit(path), "%s: %s", path, c.text("main"))
	if shot != "" {
		screenshot(c.t, c.ctx, c.shots, shot)
	}
}

// location is the tab's path and query.
func (c consoleTab) location() string {
	c.t.Helper()
	var loc string
	c.run(chromedp.Location(&loc))
	return strings.TrimPrefix(loc, c.base)
}

func (c consoleTab) text(selector string) string {
	c.t.Helper()
	var text string
	c.run(chromedp.Text(selector, &text, chromedp.ByQuery))
	return text
}

func (c consoleTab) count(selector string) int {
	c.t.Helper()
	var n int
	c.run(chromedp.Evaluate(`document.querySelectorAll(`+strconv.Quote(selector)+`).length`, &n))
	return n
}

// signIn types the operator's token into the sign-in form and submits it with Enter.
func (c consoleTab) signIn(token string) {
	c.t.Helper()
	c.open("/console/sign-in", "")
	c.run(
		chromedp.Focus("#token", chromedp.ByQuery),
		chromedp.KeyEvent(token),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible("nav[aria-label=Console]", chromedp.ByQuery),
	)
}

// tabTo presses Tab until the element with the id has the focus (the keyboard path a person
// takes), and returns how many presses it took.
func (c consoleTab) tabTo(id string) int {
	c.t.Helper()
	for presses := 1; presses <= 100; presses++ {
		var focused string
		c.run(chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`document.activeElement ? document.activeElement.id : ""`, &focused))
		if focused == id {
			return presses
		}
	}
	c.t.Fatalf("Tab never reached #%s", id)
	return 0
}

// cookie is the tab's console session cookie.
func (c consoleTab) cookie() *http.Cookie {
	c.t.Helper()
	var cookies []*network.Cookie
	c.run(chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{c.base + "/console/"}).Do(ctx)
		return err
	}))
	for _, ck := range cookies {
		if ck.Name == "reckon_console" {
			require.True(c.t, ck.HTTPOnly, "the session cookie is HttpOnly")
			require.Equal(c.t, network.CookieSameSiteStrict, ck.SameSite, "the session cookie is SameSite=Strict")
			return &http.Cookie{Name: ck.Name, Value: ck.Value}
		}
	}
	c.t.Fatalf("no console session cookie among %d cookies", len(cookies))
	return nil
}

// csrf is the CSRF token the page's forms carry.
func (c consoleTab) csrf() string {
	c.t.Helper()
	var token string
	c.run(chromedp.Evaluate(`document.querySelector('input[name=csrf]').value`, &token))
	require.NotEmpty(c.t, token)
	return token
}

// fetchPost posts form from the page with the browser's fetch (its cookie, same origin) and
// returns the status.
func (c consoleTab) fetchPost(path string, form url.Values) int {
	c.t.Helper()
	var status int
	c.run(chromedp.Evaluate(fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams(%q)}).then(r => r.status)`,
		path, form.Encode()), &status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	return status
}

// requireLabelled checks the controls (so many) of the form matched by selector: a visible input, textarea
// or select has a <label for> of its own, and every control, buttons too, has an accessible name
// in Chromium's accessibility tree (what a screen reader announces).
func (c consoleTab) requireLabelled(selector string, controls int) {
	c.t.Helper()
	all := selector + ` input:not([type=hidden]), ` + selector + ` textarea, ` + selector + ` select, ` + selector + ` button`
	var unlabelled []string
	c.run(chromedp.Evaluate(`[...document.querySelectorAll(`+strconv.Quote(all)+`)]
		.filter(el => el.tagName !== "BUTTON" && !(el.id && document.querySelector('label[for="' + el.id + '"]')))
		.map(el => el.outerHTML)`, &unlabelled))
	require.Empty(c.t, unlabelled, "controls without a label[for]")
	var nodes []*cdp.Node
	c.run(chromedp.Nodes(all, &nodes, chromedp.ByQueryAll))
	require.Len(c.t, nodes, controls, selector)
	for _, node := range nodes {
		var ax []*accessibility.Node
		c.run(chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			ax, err = accessibility.GetPartialAXTree().WithBackendNodeID(node.BackendNodeID).WithFetchRelatives(false).Do(ctx)
			return err
		}))
		require.NotEmpty(c.t, ax)
		var name string
		if ax[0].Name != nil {
			name, _ = strconv.Unquote(string(ax[0].Name.Value))
		}
		require.NotEmpty(c.t, strings.TrimSpace(name), "accessible name of %s#%s", node.LocalName, node.AttributeValue("id"))
	}
}

// operatorToken adds an operator with `server operators add` and returns its token.
func operatorToken(t *testing.T, env []string, server, name string, flags ...string) string {
	t.Helper()
	res := proctest.Run(t, env, server, append([]string{"operators", "add", "-name", name}, flags...)...)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	token := regexp.MustCompile(`rko_[A-Za-z0-9_-]+`).FindString(res.Stdout)
	require.NotEmpty(t, token, "no token in %q", res.Stdout)
	return token
}

// consoleRig is what a console browser test starts from: a headless Chromium (started first, so
// that without one the test skips before any work), the screenshots' directory, the server binary,
// a database of its own and the environment that points the binaries at it.
func consoleRig(t *testing.T) (browser context.Context, shots, server string, pool *pgxpool.Pool, env []string) {
	t.Helper()
	browser = startChromium(t, 3*time.Minute)
	shots = screenshotDir(t)
	server, pool, env = serverOnDB(t)
	return browser, shots, server, pool, env
}

// TestConsoleInBrowser drives the console in headless Chromium against the real server and
// reactor binaries and a fake bank, with demo-like data: wires that end STUCK (the bank moved the
// money, dropped the connection, and its status checks cannot say), settled wires in a run, a
// saga, a session. An admin signs in and lands on the STUCK queue, which shows each wire's
// evidence; opens one and resolves it CONFIRMED with a reason using the keyboard only, on a form
// whose every control is labelled; the page shows the new state and the audit row naming
// operator:console:alice, as does reckon_effect_transitions. A viewer sees no resolve form, and
// its forged POSTs (fetch from the page; a plain HTTP POST with its cookie and a valid CSRF token)
// are 403 and change nothing; a POST without the CSRF token is 403 even for the admin. An operator
// scoped to globex sees none of acme's effects (404 for one's page). Every page is screenshotted.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	started := time.Now()
	browser, shots, server, pool, env := consoleRig(t)
	tokens := tenantTokens(t, env, server, "acme", "globex")
	alice := operatorToken(t, env, server, "alice", "-role", "admin")
	victor := operatorToken(t, env, server, "victor", "-role", "viewer")
	sam := operatorToken(t, env, server, "sam", "-role", "operator", "-tenants", "globex")

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	base := "http://" + srv.Addr(t)
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms", "-in-flight-margin", "2s")
	reactor.Addr(t)
	w := seedConsoleWorld(t, pool, apiClient{t: t, base: base}, systemToken(t, env, server), tokens, reactor)
	t.Logf("data ready after %v", time.Since(started).Round(time.Millisecond))

	// An admin signs in and lands on the STUCK queue, with each wire's evidence.
	admin := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	require.EqualValues(t, http.StatusOK, admin.visit("/console/"))
	require.Equal(t, "/console/sign-in", admin.location(), "no session: the sign-in page")
	admin.requireLabelled(`form[action="/console/sign-in"]`, 2) // the token and the button
	screenshot(t, admin.ctx, shots, "sign-in")
	admin.signIn(alice)
	require.Equal(t, "/console/stuck", admin.location(), "the landing page is the STUCK queue while it is not empty")
	screenshot(t, admin.ctx, shots, "stuck")
	w.requireEvidenceCard(admin, w.ids["demo-mystery"])
	w.resolveWithKeyboard(admin, w.ids["demo-mystery"])

	// A POST without the CSRF token, or with another, is refused even for the admin.
	fog := w.ids["demo-fog"]
	before := w.transitions("demo-fog")
	resolveFog := url.Values{"to": {"FAILED"}, "reason": {"no token"}}
	require.Equal(t, http.StatusForbidden, postForm(t, base, admin.cookie(), "/console/effects/"+fog+"/resolve", resolveFog))
	resolveFog.Set("csrf", "not-the-session-token")
	require.Equal(t, http.StatusForbidden, postForm(t, base, admin.cookie(), "/console/effects/"+fog+"/resolve", resolveFog))
	require.Equal(t, http.StatusForbidden, admin.fetchPost("/console/effects/"+fog+"/resolve", resolveFog))
	require.Equal(t, "STUCK", w.stateOf("demo-fog"))
	require.Equal(t, before, w.transitions("demo-fog"), "nothing recorded")

	w.requireAdminPages(admin)
	viewer := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	w.requireViewerCannotAct(viewer, victor, before)
	scoped := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	w.requireScopedToGlobex(scoped, sam, before)

	t.Logf("screenshots in %s; whole test %v", shots, time.Since(started).Round(time.Millisecond))
	stopBoth(t, srv, reactor)
}

// consoleWorld is the data TestConsoleInBrowser's console shows: the fake bank's wires (effect ids
// by idempotency key), a saga and a session.
type consoleWorld struct {
	t                  *testing.T
	pool               *pgxpool.Pool
	bank               *fakebank.Bank
	ids                map[string]string
	sagaID, sessionKey string
}

// seedConsoleWorld defines the demo's bank connector (cmd/demo, with shorter backoffs) and saga
// over api with the system token, enqueues the tenants' wires — three of which end STUCK (the bank
// moved the money, dropped the connection, and its status checks cannot say) — and starts a saga
// and a session, then waits for the reactor to settle the wires.
func seedConsoleWorld(t *testing.T, pool *pgxpool.Pool, api apiClient, system string, tokens map[string]string, reactor *proctest.Process) *consoleWorld {
	t.Helper()
	// The demo's bank and connector (cmd/demo), with shorter backoffs.
	bank := fakebank.New(t)
	bankURL := bank.URL() + fakebank.ReckonPrefix
	r := api.do("POST", "/v1/connectors", system, `{"name":"demo.bank.wire","tags":["write","external","network"],
		"dispatch_url":"`+bankURL+`/wires","status_url":"`+bankURL+`/wires/status","compensate_url":"`+bankURL+`/wires/compensate",
		"timeout_ms":1000,"max_attempts":5,"status_check_limit":3,"backoff_initial_ms":20,"backoff_max_ms":200}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	r = api.do("POST", "/v1/saga-definitions", system, `{"name":"transfer","steps":[
		{"name":"debit","connector":"demo.bank.wire","undo":"connector"},
		{"name":"credit","connector":"demo.bank.wire","undo":"none"}]}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	require.Eventually(t, func() bool { return reactor.Logged("http connector added") }, 30*time.Second, 20*time.Millisecond)

	wires := []struct{ tenant, key string }{
		{"acme", "demo-plain"}, {"acme", "demo-busy"}, {"acme", "demo-mystery"}, {"acme", "demo-fog"}, {"globex", "demo-globex-mystery"},
	}
	for _, w := range wires {
		if strings.Contains(w.key, "mystery") || strings.Contains(w.key, "fog") {
			bank.Script(w.key, fakebank.PerformThenDrop)
			bank.ScriptStatus(w.key, fakebank.StatusInconclusive, fakebank.StatusInconclusive, fakebank.StatusInconclusive)
		}
		if w.key == "demo-busy" {
			bank.Script(w.key, fakebank.Unavailable, fakebank.Succeed)
		}
	}
	ids := map[string]string{}
	for i, w := range wires {
		r := api.do("POST", "/v1/effects", tokens[w.tenant], `{"connector":"demo.bank.wire","idempotency_key":"`+w.key+`",
			"run_id":"demo-run","business_key":"invoice-`+strconv.Itoa(100+i)+`","args":{"account":"acc-`+w.key+`","amount":`+strconv.Itoa(100*(i+1))+`}}`)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		ids[w.key] = r.body["id"].(string)
	}
	r = api.do("POST", "/v1/sagas", tokens["acme"], `{"definition":"transfer","input":{"account":"acc-saga","amount":70},"start_key":"t-1"}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	sagaID := r.body["id"].(string)
	sessionKey := "acme:support-bot:user-7:web"
	r = api.do("POST", "/v1/sessions/"+url.PathEscape(sessionKey)+"/messages", tokens["acme"], `{"message_id":"m1","content":{"text":"refund order 9"}}`)
	require.Equal(t, http.StatusAccepted, r.status, r.raw)

	world := &consoleWorld{t: t, pool: pool, bank: bank, ids: ids, sagaID: sagaID, sessionKey: sessionKey}
	require.Eventually(t, func() bool {
		for _, w := range wires {
			if s := world.stateOf(w.key); s != "CONFIRMED" && s != "STUCK" {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond)
	for _, key := range []string{"demo-mystery", "demo-fog", "demo-globex-mystery"} {
		require.Equal(t, "STUCK", world.stateOf(key), key)
	}
	return world
}

// stateOf is the state of the wire with idempotency key key.
func (w *consoleWorld) stateOf(key string) string {
	var state string
	require.NoError(w.t, w.pool.QueryRow(context.Background(), `SELECT state::text FROM reckon_effects WHERE id = $1`, w.ids[key]).Scan(&state))
	return state
}

// transitions counts the recorded transitions of the wire with idempotency key key.
func (w *consoleWorld) transitions(key string) int {
	return testkit.Count(w.t, w.pool, `SELECT count(*) FROM reckon_effect_transitions WHERE effect_id = $1`, w.ids[key])
}

// requireEvidenceCard: the STUCK queue's card of the effect mystery shows its evidence and every
// transition's actor and reason.
func (w *consoleWorld) requireEvidenceCard(admin consoleTab, mystery string) {
	t := w.t
	t.Helper()
	card := admin.text(`article[aria-labelledby="h-` + mystery + `"]`)
	for _, evidence := range []string{"demo.bank.wire", "acme", "demo-mystery", "invoice-102", "acc-demo-mystery", "300",
		"Attempts", "PENDING", "UNKNOWN", "STUCK", "by "} {
		require.Contains(t, card, evidence)
	}
	require.Equal(t, 3, admin.count(`article.evidence`), "the three STUCK wires, both tenants")
	var history []struct{ Actor, Reason string }
	rows, err := w.pool.Query(context.Background(), `SELECT actor, reason FROM reckon_effect_transitions WHERE effect_id = $1 ORDER BY id`, mystery)
	require.NoError(t, err)
	for rows.Next() {
		var h struct{ Actor, Reason string }
		require.NoError(t, rows.Scan(&h.Actor, &h.Reason))
		history = append(history, h)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(history), 3)
	for _, h := range history {
		require.Contains(t, card, h.Actor, "every transition's actor is on the card")
		if h.Reason != "" {
			require.Contains(t, card, h.Reason, "every transition's reason is on the card")
		}
	}
}

// resolveWithKeyboard opens the effect mystery and resolves it CONFIRMED with a reason using the
// keyboard only, on a form whose every control is labelled; the page and
// reckon_effect_transitions then name operator:console:alice, and nothing went to the bank.
func (w *consoleWorld) resolveWithKeyboard(admin consoleTab, mystery string) {
	t := w.t
	t.Helper()
	shots := admin.shots
	admin.run(chromedp.Click(`a[href="/console/effects/`+mystery+`"]`, chromedp.ByQuery), chromedp.WaitVisible(`#timeline-h`, chromedp.ByQuery))
	require.Equal(t, "/console/effects/"+mystery, admin.location())
	screenshot(t, admin.ctx, shots, "effect-before")
	form := `form[action="/console/effects/` + mystery + `/resolve"]`
	admin.requireLabelled(form, 5) // three choices, the reason and the button
	admin.run(chromedp.Evaluate(`document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)`, nil))
	presses := admin.tabTo("to-confirmed-" + mystery)
	t.Logf("Tab reached the resolve form's first choice in %d presses", presses)
	reason := "the bank's statement of 3 Dec shows the wire"
	admin.run(chromedp.KeyEvent(" ")) // Space checks the focused radio button
	admin.tabTo("reason-" + mystery)
	admin.run(chromedp.KeyEvent(reason))
	var focusedButton string
	admin.run(chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`document.activeElement.tagName + " " + document.activeElement.textContent`, &focusedButton))
	require.Equal(t, "BUTTON Resolve", focusedButton)
	admin.run(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	require.Equal(t, "/console/effects/"+mystery, strings.SplitN(admin.location(), "?", 2)[0])
	screenshot(t, admin.ctx, shots, "effect-after")
	require.Equal(t, "CONFIRMED", w.stateOf("demo-mystery"))
	page := admin.text("main")
	require.Contains(t, admin.text("p.lead"), "CONFIRMED")
	require.Contains(t, page, "operator:console:alice")
	require.Contains(t, page, reason)
	require.Zero(t, admin.count(form), "a CONFIRMED effect has no resolve form")
	var actor, recorded, to string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT actor, reason, to_state::text FROM reckon_effect_transitions
		WHERE effect_id = $1 ORDER BY id DESC LIMIT 1`, mystery).Scan(&actor, &recorded, &to))
	require.Equal(t, []string{"operator:console:alice", reason, "CONFIRMED"}, []string{actor, recorded, to})
	require.Equal(t, 1, w.bank.Count("demo-mystery"), "resolving sends nothing to the bank")
}

// requireAdminPages: every other page, as the admin, shows what it is about.
func (w *consoleWorld) requireAdminPages(admin consoleTab) {
	t := w.t
	t.Helper()
	sagaID, sessionKey := w.sagaID, w.sessionKey
	for _, p := range []struct{ path, shot, want string }{
		{"/console/overview", "overview", "demo.bank.wire"},
		{"/console/effects", "effects", "demo-plain"},
		{"/console/effects?state=STUCK&tenant=acme", "effects-filtered", "demo-fog"},
		{"/console/bulk?state=STUCK&to=FAILED", "bulk", "demo-fog"}, // what each effect is: its key
		{"/console/sagas", "sagas", "transfer"},
		{"/console/sagas/" + sagaID, "saga", "debit"},
		{"/console/runs", "runs", "demo-run"},
		{"/console/runs/acme/demo-run", "run", "demo-run"},
		{"/console/sessions", "sessions", sessionKey},
		{"/console/sessions/" + url.PathEscape(sessionKey), "session", "refund order 9"},
		{"/console/connectors", "connectors", "demo.bank.wire"},
		{"/console/operators", "operators", "victor"},
	} {
		admin.open(p.path, p.shot)
		require.Contains(t, admin.text("main"), p.want, p.path)
		if p.shot == "effects-filtered" {
			require.NotContains(t, admin.text("main"), "demo-globex", "the filter is by tenant")
		}
	}
}

// requireViewerCannotAct: a viewer (signed in with token) sees the evidence but no form to act,
// and its forged posts — from the page, and plain HTTP with its cookie and a valid CSRF token —
// are 403 and record nothing (before: the fog wire's transitions).
func (w *consoleWorld) requireViewerCannotAct(viewer consoleTab, token string, before int) {
	t := w.t
	t.Helper()
	shots, base, fog := viewer.shots, viewer.base, w.ids["demo-fog"]
	viewer.signIn(token)
	require.Equal(t, "/console/stuck", viewer.location())
	require.Equal(t, 2, viewer.count(`article.evidence`))
	require.Zero(t, viewer.count(`form[action$="/resolve"]`), "no resolve form for a viewer")
	require.Zero(t, viewer.count(`form[action="/console/bulk"]`), "no bulk action for a viewer")
	screenshot(t, viewer.ctx, shots, "stuck-viewer")
	viewer.open("/console/effects/"+fog, "")
	require.Contains(t, viewer.text("main"), "acc-demo-fog")
	require.Zero(t, viewer.count(`form[action$="/resolve"], form[action$="/cancel"]`))
	require.NotContains(t, viewer.text("main"), "Resolve this")
	require.EqualValues(t, http.StatusForbidden, viewer.visit("/console/operators"), "admins only")
	require.EqualValues(t, http.StatusForbidden, viewer.visit("/console/bulk?state=STUCK&to=FAILED"), "operators only")
	viewer.open("/console/effects/"+fog, "")
	forged := url.Values{"csrf": {viewer.csrf()}, "to": {"CONFIRMED"}, "reason": {"forged by a viewer"}}
	require.Equal(t, http.StatusForbidden, viewer.fetchPost("/console/effects/"+fog+"/resolve", forged))
	require.Equal(t, http.StatusForbidden, postForm(t, base, viewer.cookie(), "/console/effects/"+fog+"/resolve", forged))
	require.Equal(t, http.StatusForbidden, postForm(t, base, viewer.cookie(), "/console/bulk", url.Values{"csrf": forged["csrf"],
		"to": {"FAILED"}, "reason": {"forged"}, "id": {fog}}))
	require.Equal(t, "STUCK", w.stateOf("demo-fog"))
	require.Equal(t, before, w.transitions("demo-fog"), "nothing recorded")
}

// requireScopedToGlobex: an operator scoped to globex (signed in with token) never sees acme's
// effects, saga or run (404), and cannot resolve acme's wire (before: its transitions).
func (w *consoleWorld) requireScopedToGlobex(scoped consoleTab, token string, before int) {
	t := w.t
	t.Helper()
	base, ids, fog, sagaID := scoped.base, w.ids, w.ids["demo-fog"], w.sagaID
	scoped.signIn(token)
	require.Equal(t, "/console/stuck", scoped.location())
	stuck := scoped.text("main")
	require.Contains(t, stuck, "demo-globex-mystery")
	require.NotContains(t, stuck, "demo-fog")
	require.Equal(t, 1, scoped.count(`article.evidence`))
	require.Equal(t, 1, scoped.count(`form[action$="/resolve"]`), "an operator may act on its tenant's effect")
	scoped.open("/console/effects", "")
	require.NotContains(t, scoped.text("main"), "acme")
	for _, key := range []string{"demo-fog", "demo-plain"} {
		require.EqualValues(t, http.StatusNotFound, scoped.visit("/console/effects/"+ids[key]), key)
		require.NotContains(t, scoped.text("main"), "acc-"+key)
	}
	require.EqualValues(t, http.StatusNotFound, scoped.visit("/console/sagas/"+sagaID))
	require.EqualValues(t, http.StatusNotFound, scoped.visit("/console/runs/acme/demo-run"))
	scoped.open("/console/effects/"+ids["demo-globex-mystery"], "")
	forged := url.Values{"csrf": {scoped.csrf()}, "to": {"CONFIRMED"}, "reason": {"not my tenant"}}
	require.Equal(t, http.StatusNotFound, postForm(t, base, scoped.cookie(), "/console/effects/"+fog+"/resolve", forged))
	require.Equal(t, "STUCK", w.stateOf("demo-fog"))
	require.Equal(t, before, w.transitions("demo-fog"), "nothing recorded")
}

// postForm POSTs form to the console at base+path with cookie, as a plain HTTP client (no
// redirects followed), and returns the status.
func postForm(t *testing.T, base string, cookie *http.Cookie, path string, form url.Values) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
