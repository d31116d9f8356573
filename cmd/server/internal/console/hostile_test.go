package console_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// The console from outside, as an attacker or a careless operator would use it: every route
// (read from Register, so that a new one is swept too) with hostile values in each of its
// parameters and path segments, without a session, with a role too small, in another tenant's
// scope, and with a tampered session cookie. Never a 5xx; a 400 names the field; nothing changes.

// registeredRoutes reads the patterns Register mounts from console.go.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("console.go")
	require.NoError(t, err)
	var routes []string
	for _, m := range regexp.MustCompile(`mux\.Handle(?:Func)?\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		routes = append(routes, m[1])
	}
	require.NotEmpty(t, routes)
	return routes
}

// Roles a route needs, as routeCase.least.
const (
	public     = "public"
	viewer     = "viewer"
	operatorOn = "operator"
	admin      = "admin"
)

// routeCase is how to call a route: its least role, its wildcards' values, the parameters it reads
// (query for GET, form for POST), and for a POST a valid form whose action changes nothing here
// (the effect is not STUCK, the run already cancelled, ...), so that only a hostile value can make
// something change.
type routeCase struct {
	least  string
	wild   map[string]string // wildcard → a valid value; "*" is what a pattern ending in / gets
	params []string
	form   url.Values
	// fresh: each request needs its own browser (signing out ends the session; signing in needs
	// the sign-in form's cookie).
	fresh bool
}

// world is what the sweeps act on: acme's objects (the operators see them) and globex's (the
// scoped operator must not).
type world struct {
	stuck, pending, settled *effects.Effect // acme
	saga                    *saga.Saga      // acme, RUNNING: not resolvable
	theirStuck, theirWait   *effects.Effect // globex
	theirHeld               *effects.Effect // globex, awaiting its confirmation
	theirSaga               *saga.Saga
	theirKeys               []string // globex's idempotency keys, run, session and tenant: never in acme's pages
	adminToken              string
}

const (
	acmeSession   = "acme:agent:ann:chat"
	globexSession = "globex:agent:bob:chat"
)

func newWorld(t *testing.T, h *harness) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{stuck: h.stuck("acme", "acme-stuck"), pending: h.enqueue("acme", "acme-pending", nil)}
	w.settled = h.stuck("acme", "acme-settled")
	_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'operator:setup', transition_reason = 'settled' WHERE id = $1`, w.settled.ID)
	require.NoError(t, err)
	h.enqueue("acme", "acme-run/1", &effects.Spec{RunID: "run-a"})
	h.enqueue("acme", "acme-done/1", &effects.Spec{RunID: "run-done"})
	_, err = h.effects.CancelRun(ctx, "run-done", "setup", "setup", &effects.RunOpts{TenantID: "acme"})
	require.NoError(t, err)
	w.saga, err = h.sagas.Start(ctx, "order", map[string]any{"n": 1}, &saga.StartOpts{TenantID: "acme"})
	require.NoError(t, err)
	_, err = h.turns.Submit(ctx, turns.Inbound{SessionKey: acmeSession, Content: map[string]string{"text": "hello"}})
	require.NoError(t, err)

	w.theirStuck = h.stuck("globex", "globex-secret-stuck")
	w.theirWait = h.enqueue("globex", "globex-secret-pending", nil)
	w.theirHeld = h.held("globex", "globex-secret-held", "globex-secret-payee", "")
	h.enqueue("globex", "globex-secret-run/1", &effects.Spec{RunID: "run-globex"})
	w.theirSaga, err = h.sagas.Start(ctx, "order", map[string]any{"n": 2}, &saga.StartOpts{TenantID: "globex"})
	require.NoError(t, err)
	_, err = h.turns.Submit(ctx, turns.Inbound{SessionKey: globexSession, Content: map[string]string{"text": "hi"}})
	require.NoError(t, err)
	w.theirKeys = []string{"globex", "globex-secret-stuck", "globex-secret-pending", "globex-secret-run/1", "run-globex",
		"globex-secret-held", "globex-secret-payee", w.theirStuck.ID.String(), w.theirStuck.ID.String()[24:],
		w.theirWait.ID.String()[24:], w.theirSaga.ID.String()[24:], w.theirHeld.ID.String()[24:]}

	// bank.wire's limits: an operator's, and globex's own key paused (its limit per tenant).
	_, err = h.effects.SetLimit(ctx, "bank.wire", effects.Limit{Rate: 5, PerTenant: true}, "operator:setup", "setup")
	require.NoError(t, err)
	h.pause("bank.wire", "globex")

	w.adminToken = h.operator("root", operator.RoleAdmin)
	h.operator("gone", operator.RoleViewer)
	_, err = h.operators.Revoke(ctx, "gone")
	require.NoError(t, err)
	return w
}

// routes is how to call each registered route; TestHostileInput fails for a route missing here.
func (w *world) routes() map[string]routeCase {
	effectFilter := []string{"tenant", "state", "connector", "idempotency_key", "business_key", "run", "turn",
		"created_after", "created_before", "limit", "after"}
	return map[string]routeCase{
		"GET /{$}":                  {least: public},
		"GET /console/static/":      {least: public, wild: map[string]string{"*": "console.css"}},
		"GET /console/sign-in":      {least: public},
		"POST /console/sign-in":     {least: public, params: []string{"token", "csrf"}, form: url.Values{"token": {w.adminToken}}, fresh: true},
		"POST /console/sign-out":    {least: viewer, params: []string{"csrf"}, form: url.Values{}, fresh: true},
		"GET /console/{$}":          {least: viewer},
		"GET /console/overview":     {least: viewer},
		"GET /console/stuck":        {least: viewer, params: []string{"after"}},
		"GET /console/awaiting":     {least: viewer, params: []string{"after"}},
		"GET /console/effects":      {least: viewer, params: effectFilter},
		"GET /console/effects/{id}": {least: viewer, wild: map[string]string{"id": w.stuck.ID.String()}, params: []string{"done"}},
		"POST /console/effects/{id}/resolve": {least: operatorOn, wild: map[string]string{"id": w.settled.ID.String()},
			params: []string{"to", "reason"}, form: url.Values{"to": {"FAILED"}, "reason": {"hostile sweep"}}},
		"POST /console/effects/{id}/cancel": {least: operatorOn, wild: map[string]string{"id": w.stuck.ID.String()},
			params: []string{"reason"}, form: url.Values{"reason": {"hostile sweep"}}},
		"POST /console/effects/{id}/confirm": {least: operatorOn, wild: map[string]string{"id": w.settled.ID.String()},
			params: []string{"reason"}, form: url.Values{"reason": {"hostile sweep"}}},
		"POST /console/effects/{id}/decline": {least: operatorOn, wild: map[string]string{"id": w.settled.ID.String()},
			params: []string{"reason"}, form: url.Values{"reason": {"hostile sweep"}}},
		"POST /console/effects/{id}/redrive": {least: operatorOn, wild: map[string]string{"id": w.settled.ID.String()},
			params: []string{"reason"}, form: url.Values{"reason": {"hostile sweep"}}},
		"GET /console/bulk": {least: operatorOn, params: append(slices.Clone(effectFilter), "to", "action")},
		"POST /console/bulk": {least: operatorOn, params: []string{"to", "reason", "id", "action"},
			form: url.Values{"to": {"FAILED"}, "reason": {"hostile sweep"}, "id": {w.settled.ID.String()}}},
		"GET /console/sagas":      {least: viewer, params: []string{"tenant", "state", "name", "limit", "after"}},
		"GET /console/sagas/{id}": {least: viewer, wild: map[string]string{"id": w.saga.ID.String()}, params: []string{"done"}},
		"POST /console/sagas/{id}/resolve": {least: operatorOn, wild: map[string]string{"id": w.saga.ID.String()},
			params: []string{"decision", "reason"}, form: url.Values{"decision": {string(saga.MarkCompensated)}, "reason": {"hostile sweep"}}},
		"GET /console/runs": {least: viewer, params: []string{"tenant", "after"}},
		"GET /console/runs/{tenant}/{id}": {least: viewer, wild: map[string]string{"tenant": "acme", "id": "run-a"},
			params: []string{"done"}},
		"POST /console/runs/{tenant}/{id}/cancel": {least: operatorOn, wild: map[string]string{"tenant": "acme", "id": "run-done"},
			params: []string{"reason"}, form: url.Values{"reason": {"hostile sweep"}}},
		"GET /console/sessions":           {least: viewer, params: []string{"after"}},
		"GET /console/sessions/{session}": {least: viewer, wild: map[string]string{"session": acmeSession}},
		"GET /console/schedules":          {least: viewer, params: []string{"after"}},
		"GET /console/connectors":         {least: viewer},
		"GET /console/connectors/{name}":  {least: viewer, wild: map[string]string{"name": "bank.wire"}, params: []string{"done"}},
		// A connector the console does not list: a valid form is 404, a bad value 400.
		"POST /console/connectors/{name}/limit": {least: operatorOn, wild: map[string]string{"name": "no.such"},
			params: []string{"rate", "per", "burst", "max_in_flight", "per_tenant", "break_after", "break_for", "reason"},
			form: url.Values{"rate": {"5"}, "per": {"1s"}, "burst": {"5"}, "max_in_flight": {"2"}, "per_tenant": {"on"},
				"break_after": {"3"}, "break_for": {"30s"}, "reason": {"hostile sweep"}}},
		"POST /console/connectors/{name}/limit/clear": {least: operatorOn, wild: map[string]string{"name": "no.such"}, form: url.Values{}},
		"POST /console/connectors/{name}/limit/reset": {least: operatorOn, wild: map[string]string{"name": "no.such"}, form: url.Values{}},
		"POST /console/connectors/{name}/pause": {least: operatorOn, wild: map[string]string{"name": "no.such"},
			params: []string{"tenant_id", "reason"}, form: url.Values{"tenant_id": {"acme"}, "reason": {"hostile sweep"}}},
		"POST /console/connectors/{name}/resume": {least: operatorOn, wild: map[string]string{"name": "no.such"},
			params: []string{"tenant_id", "reason"}, form: url.Values{"tenant_id": {"acme"}, "reason": {"hostile sweep"}}},
		"GET /console/operators": {least: admin, params: []string{"revoked"}},
		"POST /console/operators/{name}/revoke": {least: admin, wild: map[string]string{"name": "gone"},
			form: url.Values{}},
		"/console/": {least: viewer, wild: map[string]string{"*": "nope"}},
	}
}

// routePath is the method and path of a pattern, with wild's values (escaped) in its wildcards.
func routePath(pattern string, wild map[string]string) (method, path string) {
	escaped := map[string]string{}
	for name, value := range wild {
		escaped[name] = url.PathEscape(value)
	}
	return rawRoutePath(pattern, escaped)
}

// rawRoutePath is routePath with the values already escaped.
func rawRoutePath(pattern string, wild map[string]string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	path = strings.ReplaceAll(path, "{$}", "")
	for name, value := range wild {
		if name == "*" {
			path += value
			continue
		}
		path = strings.ReplaceAll(path, "{"+name+"}", value)
	}
	return method, path
}

// cursor is a cursor's opaque form (base64url) of raw.
func cursor(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }

// hostileValues go into every parameter.
var hostileValues = []string{
	"\x00", "a\x00b", "\xff", "\xfe\xff", strings.Repeat("x", 10_000), strings.Repeat("é", 1500),
	"", " ", "not-a-uuid", "2026-02-30T25:61:00Z", "10000-01-01T00:00:00Z", "SIDEWAYS", "stuck",
	"-1", "0", "99999999999999999999", "-99999999999999999999", "1e3",
	"!!garbage!!", "%00", "<script>alert(1)</script>", "../../etc/passwd",
	cursor("9223372036854775807/" + uuid.NewString()), cursor("-9223372036854775808/" + uuid.NewString()),
	cursor("1/not-a-uuid"), cursor("1/acme"), cursor("1/acme/run-a"), cursor("9223372036854775807/acme/run-a"),
	cursor("-9223372036854775808/" + acmeSession), cursor("x/y"), cursor("1/\x00"),
}

// hostileSegments go into every path wildcard (already escaped).
var hostileSegments = []string{"%00", "%FF", "%FE%FF", "a%00b", strings.Repeat("x", 10_000), "not-a-uuid", "%2F", "%2F..%2F..",
	"%20", "%3Cscript%3E", "00000000-0000-0000-0000-000000000000", "%25", ".."}

// snapshot is what an action could change: effects' states and transitions, sagas and theirs,
// runs and their cancellations, operators and their revocations, the operators' limits and the
// limit keys' pauses and circuits.
func (h *harness) snapshot() string {
	h.t.Helper()
	var s string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT string_agg(id::text || ':' || state || ':' || coalesce(confirmation, '-'), ',' ORDER BY id) FROM reckon_effects),
		(SELECT count(*) FROM reckon_effect_transitions),
		(SELECT string_agg(id::text || ':' || state, ',' ORDER BY id) FROM reckon_sagas),
		(SELECT count(*) FROM reckon_saga_transitions),
		(SELECT string_agg(tenant_id || '/' || id || ':' || coalesce(cancel_reason, '-'), ',' ORDER BY tenant_id, id) FROM reckon_runs),
		(SELECT string_agg(name || ':' || (revoked_at IS NULL)::text, ',' ORDER BY name, created_at) FROM reckon_operators),
		(SELECT string_agg(concat_ws(':', connector, rate, per_ms, burst, max_in_flight, per_tenant, break_after, break_for_ms,
			set_by, reason, set_at), ',' ORDER BY connector) FROM reckon_connector_limits),
		(SELECT string_agg(concat_ws(':', connector, tenant_id, paused_until, failures, opened_until), ',' ORDER BY connector, tenant_id)
			FROM reckon_limit_state),
		(SELECT string_agg(concat_ws(':', connector, tenant_id, paused_by, reason, paused_at), ',' ORDER BY connector, tenant_id)
			FROM reckon_connector_pauses),
		(SELECT count(*) FROM reckon_connector_pause_log))`).Scan(&s))
	return s
}

// signedInWith is a new browser signed in with token, holding its session's CSRF token.
func (h *harness) signedInWith(token string) *browser {
	h.t.Helper()
	b := h.browser()
	p := b.signIn(token)
	require.Equal(h.t, http.StatusSeeOther, p.status, p.body)
	require.Equal(h.t, http.StatusOK, b.get("/console/overview").status)
	return b
}

// call sends one request of a route: a GET with query, or a POST of form (the session's CSRF
// token added unless form has one).
func (b *browser) call(method, path string, values url.Values) page {
	b.h.t.Helper()
	if method == http.MethodPost {
		return b.post(path, values)
	}
	if len(values) > 0 {
		path += "?" + values.Encode()
	}
	return b.get(path)
}

// requireSane asserts an answer is not a 5xx, that a 400 names field (when field is not ""), and
// that a hostile value is never echoed unescaped.
func requireSane(t *testing.T, p page, field, what string) {
	t.Helper()
	assert.Less(t, p.status, 500, "%s: %s", what, p.body)
	if p.status == http.StatusBadRequest && field != "" {
		assert.Contains(t, p.body, "<strong>"+field+"</strong>", "%s: the 400 names the field", what)
	}
	assert.NotContains(t, p.body, "<script>alert(1)</script>", what)
}

func clone(v url.Values) url.Values {
	out := url.Values{}
	for name, values := range v {
		out[name] = slices.Clone(values)
	}
	return out
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Every route, signed in as admin, with hostile values in each parameter and path segment, with
// unknown and repeated parameters: never a 5xx, a 400 names the field, nothing changes.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	w := newWorld(t, h)
	routes := w.routes()
	registered := registeredRoutes(t)
	for _, pattern := range registered {
		require.Contains(t, routes, pattern, "a new route: give it a routeCase (its role, wildcards and parameters)")
	}
	require.Len(t, routes, len(registered), "routeCases for routes that are gone")

	root := h.signedInWith(w.adminToken)
	client := func(c routeCase) *browser {
		switch {
		case !c.fresh:
			return root
		case c.least == public:
			b := h.browser()
			require.Equal(t, http.StatusOK, b.get("/console/sign-in").status)
			return b
		default:
			return h.signedInWith(w.adminToken)
		}
	}
	before := h.snapshot()
	for _, pattern := range registered {
		c := routes[pattern]
		method, path := routePath(pattern, c.wild)
		send := func(values url.Values, field, what string) {
			t.Helper()
			p := client(c).call(method, path, values)
			requireSane(t, p, field, pattern+" "+what)
			if method == http.MethodPost {
				assert.Equal(t, before, h.snapshot(), "%s %s changed something", pattern, what)
			}
		}
		// The valid call answers, and changes nothing (it is the base of the others).
		send(clone(c.form), "", "as is")
		for _, name := range c.params {
			for _, value := range hostileValues {
				values := clone(c.form)
				values[name] = []string{value}
				send(values, name, name+"="+short(value))
			}
			// Repeated: the valid value (or a word) and a hostile one.
			values := clone(c.form)
			values[name] = []string{values.Get(name) + "x", "\x00"}
			send(values, name, name+" repeated")
			// Repeated with valid values (to=FAILED&to=CONFIRMED): refused naming the field, not
			// read as the first one; only the bulk form's ids repeat.
			if name != "id" {
				values = clone(c.form)
				values[name] = []string{values.Get(name), values.Get(name)}
				p := client(c).call(method, path, values)
				requireSane(t, p, name, pattern+" "+name+" given twice")
				assert.Equal(t, http.StatusBadRequest, p.status, "%s: %s given twice", pattern, name)
			}
		}
		// Unknown parameters, some with hostile names.
		for _, name := range []string{"nope", "\x00", "\xff", strings.Repeat("n", 10_000)} {
			values := clone(c.form)
			values.Set(name, "1")
			field := name
			if strings.ContainsRune(name, 0) || !utf8.ValidString(name) {
				field = "parameter name"
			}
			send(values, field, "unknown parameter "+short(name))
		}
		// Hostile path segments in each wildcard.
		for name := range c.wild {
			for _, segment := range hostileSegments {
				wild := map[string]string{}
				for k, v := range c.wild {
					wild[k] = url.PathEscape(v)
				}
				wild[name] = segment
				_, hostilePath := rawRoutePath(pattern, wild)
				field := name
				if name == "*" {
					field = ""
				}
				p := client(c).call(method, hostilePath, clone(c.form))
				requireSane(t, p, field, pattern+" path "+name+"="+short(segment))
			}
		}
		if method != http.MethodPost {
			continue
		}
		requireBadFormBodiesRefused(t, h, client(c), c, pattern, path, before)
	}
	require.Equal(t, before, h.snapshot())

	// A link cannot make the operators page announce a revocation that did not happen.
	require.NotContains(t, root.get("/console/operators?revoked=root").body, "Revoked root")
	require.NotContains(t, root.get("/console/operators?revoked=mallory").body, "Revoked mallory")
	require.Contains(t, root.get("/console/operators?revoked=gone").body, "Revoked gone; its sessions are over.")
}

// signInCSRF is the sign-in form's CSRF token the browser holds in its cookie.
func (b *browser) signInCSRF() string {
	for _, cookie := range b.client.Jar.Cookies(mustURL(b.h.t, b.h.server.URL+"/console/sign-in")) {
		if cookie.Name == "reckon_console_sign_in" {
			return cookie.Value
		}
	}
	return ""
}

// serve sends req to the console's handler directly (no client between: raw bytes in headers,
// bodies of any size) and returns its answer.
func (h *harness) serve(req *http.Request) page {
	h.t.Helper()
	rec := httptest.NewRecorder()
	h.handler.ServeHTTP(rec, req)
	return page{status: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

// acting is, for each route that acts, a call that changes something when it is allowed: the
// authorization tests show it is refused, then that an admin's same call acts (or, for the saga,
// reaches the saga: a RUNNING saga is not resolvable).
func (w *world) acting(h *harness) map[string]routeCase {
	reason := url.Values{"reason": {"authorized?"}}
	return map[string]routeCase{
		"POST /console/effects/{id}/resolve": {wild: map[string]string{"id": w.stuck.ID.String()},
			form: url.Values{"to": {"FAILED"}, "reason": {"authorized?"}}},
		"POST /console/effects/{id}/cancel": {wild: map[string]string{"id": w.pending.ID.String()}, form: reason},
		"POST /console/effects/{id}/confirm": {wild: map[string]string{"id": h.held("acme", "acme-held-confirm", "acct-1", "").ID.String()},
			form: reason},
		"POST /console/effects/{id}/decline": {wild: map[string]string{"id": h.held("acme", "acme-held-decline", "acct-2", "").ID.String()},
			form: reason},
		"POST /console/effects/{id}/redrive": {wild: map[string]string{"id": h.failed("acme", "acme-failed-redrive").ID.String()},
			form: reason},
		"POST /console/bulk": {form: url.Values{"to": {"FAILED"}, "reason": {"authorized?"},
			"id": {h.stuck("acme", "acme-stuck-bulk").ID.String()}}},
		"POST /console/sagas/{id}/resolve": {wild: map[string]string{"id": w.saga.ID.String()},
			form: url.Values{"decision": {string(saga.MarkCompensated)}, "reason": {"authorized?"}}},
		"POST /console/runs/{tenant}/{id}/cancel": {wild: map[string]string{"tenant": "acme", "id": "run-a"}, form: reason},
		"POST /console/operators/{name}/revoke":   {wild: map[string]string{"name": "victim"}, form: url.Values{}},
		"POST /console/connectors/{name}/limit": {wild: map[string]string{"name": "bank.wire"},
			form: url.Values{"rate": {"7"}, "reason": {"authorized?"}}},
		"POST /console/connectors/{name}/limit/clear": {wild: map[string]string{"name": "bank.wire"}, form: url.Values{}},
		"POST /console/connectors/{name}/limit/reset": {wild: map[string]string{"name": "bank.wire"}, form: url.Values{}},
		"POST /console/connectors/{name}/pause":       {wild: map[string]string{"name": "bank.wire"}, form: reason},
		"POST /console/connectors/{name}/resume":      {wild: map[string]string{"name": "bank.wire"}, form: reason},
	}
}

// A viewer's every call of a route for operators or admins is 403, as is an operator's of a route
// for admins, and nothing changes; the same calls by an admin act. Without a session every page
// sends to the sign-in form and every form is refused.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	h := setup(t)
	w := newWorld(t, h)
	h.operator("victim", operator.RoleViewer)
	routes, acting := w.routes(), w.acting(h)
	call := func(b *browser, pattern string) page {
		t.Helper()
		c := routes[pattern]
		if a, ok := acting[pattern]; ok {
			c.wild, c.form = a.wild, a.form
		}
		method, path := routePath(pattern, c.wild)
		return b.call(method, path, clone(c.form))
	}
	viewerB := h.signedIn("vic", operator.RoleViewer)
	operatorB := h.signedIn("opal", operator.RoleOperator)
	root := h.signedInWith(w.adminToken)
	before := h.snapshot()

	registered := registeredRoutes(t)
	for _, pattern := range registered {
		c := routes[pattern]
		for _, who := range []struct {
			b    *browser
			role string
		}{{viewerB, viewer}, {operatorB, operatorOn}} {
			if c.least != admin && (c.least != operatorOn || who.role != viewer) {
				continue
			}
			p := call(who.b, pattern)
			require.Equal(t, http.StatusForbidden, p.status, "%s as %s: %s", pattern, who.role, p.body)
			require.Equal(t, before, h.snapshot(), "%s as %s", pattern, who.role)
		}
		// Without a session: the sign-in form, nothing done, even with a valid CSRF token of
		// another session.
		if c.least == public {
			continue
		}
		anonymous := h.browser()
		anonymous.csrf = root.csrf
		p := call(anonymous, pattern)
		require.Equal(t, http.StatusSeeOther, p.status, "%s without a session: %s", pattern, p.body)
		require.Equal(t, "/console/sign-in", p.location(), pattern)
		require.Equal(t, before, h.snapshot(), "%s without a session", pattern)
	}
	// Nobody was signed out or revoked by the refused calls.
	for _, b := range []*browser{viewerB, operatorB, root} {
		require.Equal(t, http.StatusOK, b.get("/console/overview").status)
	}

	// The same calls by an admin act: the refusals above were the roles', not the forms'.
	for _, pattern := range registered {
		if routes[pattern].least != operatorOn && routes[pattern].least != admin {
			continue
		}
		_, ok := acting[pattern]
		if !ok || !strings.HasPrefix(pattern, http.MethodPost) {
			continue
		}
		snap := h.snapshot()
		p := call(root, pattern)
		if pattern == "POST /console/sagas/{id}/resolve" {
			require.Equal(t, http.StatusConflict, p.status, p.body)
			continue
		}
		require.Contains(t, []int{http.StatusOK, http.StatusSeeOther}, p.status, "%s as admin: %s", pattern, p.body)
		require.NotEqual(t, snap, h.snapshot(), "%s as admin changes something", pattern)
	}
}

// theirs are the wildcards of a route naming globex's objects.
func (w *world) theirs(pattern string) map[string]string {
	switch {
	case strings.Contains(pattern, "/effects/{id}/cancel"):
		return map[string]string{"id": w.theirWait.ID.String()}
	case strings.Contains(pattern, "/effects/{id}/confirm"), strings.Contains(pattern, "/effects/{id}/decline"):
		return map[string]string{"id": w.theirHeld.ID.String()}
	case strings.Contains(pattern, "/effects/{id}"):
		return map[string]string{"id": w.theirStuck.ID.String()}
	case strings.Contains(pattern, "/sagas/{id}"):
		return map[string]string{"id": w.theirSaga.ID.String()}
	case strings.Contains(pattern, "/runs/{tenant}/{id}"):
		return map[string]string{"tenant": "globex", "id": "run-globex"}
	case strings.Contains(pattern, "/sessions/{session}"):
		return map[string]string{"session": globexSession}
	case strings.Contains(pattern, "/connectors/{name}"): // shared by every tenant, with a key of globex's
		return map[string]string{"name": "bank.wire"}
	}
	return nil
}

// An operator scoped to acme: every page of a globex object is 404 and every action on one is
// 404 with nothing changed; no list, whatever its filter, shows a globex row.
func TestScopedOperatorSeesNoOtherTenant(t *testing.T) {
	t.Parallel()
	h := setup(t)
	w := newWorld(t, h)
	routes, acting := w.routes(), w.acting(h)
	b := h.signedIn("ann", operator.RoleOperator, "acme")
	before := h.snapshot()
	requireNothingOfTheirs := func(p page, query url.Values, what string) {
		t.Helper()
		for _, key := range w.theirKeys {
			asked := false
			for _, values := range query {
				asked = asked || slices.ContainsFunc(values, func(v string) bool { return strings.Contains(v, key) })
			}
			if !asked {
				require.NotContains(t, p.body, key, what)
			}
		}
	}
	filters := []url.Values{
		{}, {"tenant": {"globex"}}, {"tenant": {"acme"}}, {"state": {"STUCK"}}, {"state": {"PENDING"}},
		{"idempotency_key": {"globex-secret-stuck"}}, {"run": {"run-globex"}}, {"connector": {"bank.wire"}},
		{"name": {"order"}}, {"tenant": {"globex"}, "state": {"STUCK"}, "to": {"FAILED"}}, {"state": {"STUCK"}, "to": {"FAILED"}},
	}
	for _, pattern := range registeredRoutes(t) {
		c := routes[pattern]
		if c.least == public || c.least == admin || pattern == "/console/" {
			continue
		}
		theirs := w.theirs(pattern)
		if theirs == nil && len(c.wild) > 0 {
			t.Fatalf("%s: which globex object does it name? extend world.theirs", pattern)
		}
		method, path := routePath(pattern, theirs)
		switch {
		case strings.Contains(pattern, "/connectors/{name}") && method == http.MethodGet: // shared: shown, but not globex's key
			p := b.call(method, path, url.Values{})
			require.Equal(t, http.StatusOK, p.status, "%s: %s", path, p.body)
			requireNothingOfTheirs(p, nil, path)
		case strings.Contains(pattern, "/connectors/{name}"): // shared: not changed by an operator of some tenants
			p := b.call(method, path, clone(acting[pattern].form))
			require.Equal(t, http.StatusForbidden, p.status, "%s: %s", path, p.body)
			require.Equal(t, before, h.snapshot(), path)
		case theirs != nil: // a globex object: 404
			form := clone(c.form)
			if method == http.MethodPost {
				form = clone(acting[pattern].form)
			}
			p := b.call(method, path, form)
			require.Equal(t, http.StatusNotFound, p.status, "%s: %s", path, p.body)
			requireNothingOfTheirs(p, nil, path)
			require.Equal(t, before, h.snapshot(), path)
		case method == http.MethodGet: // a list: never a globex row
			for _, query := range filters {
				p := b.call(method, path, clone(query))
				require.Less(t, p.status, 500, "%s?%s: %s", path, query.Encode(), p.body)
				requireNothingOfTheirs(p, query, path+"?"+query.Encode())
			}
		}
	}
	// The bulk confirmation naming globex's STUCK effect skips it.
	p := b.post("/console/bulk", url.Values{"to": {"FAILED"}, "reason": {"x"}, "id": {w.theirStuck.ID.String()}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "<strong>1</strong> skipped")
	require.Equal(t, before, h.snapshot())
	// What the lists must not show is there: the admin sees it.
	root := h.signedInWith(w.adminToken)
	require.Contains(t, root.get("/console/effects").body, "globex-secret-stuck")
	require.Contains(t, root.get("/console/stuck").body, w.theirStuck.ID.String())
	require.Contains(t, root.get("/console/awaiting").body, "globex-secret-payee")
	require.Contains(t, root.get("/console/runs").body, "run-globex")
	require.Contains(t, root.get("/console/sessions").body, globexSession)
	require.Contains(t, root.get("/console/connectors/bank.wire").body, "tenant globex")
}

// A tampered session cookie — random bytes, NUL, too long, a real session's id changed, an
// expired session, a revoked operator's — is no session: pages send to the sign-in form (which
// answers), forms are refused, nothing changes and nothing fails.
func TestTamperedSessionCookie(t *testing.T) {
	t.Parallel()
	h := setup(t)
	w := newWorld(t, h)
	ctx := context.Background()
	sessionID := func(b *browser) string {
		for _, cookie := range b.client.Jar.Cookies(mustURL(t, h.server.URL+"/console/")) {
			if cookie.Name == "reckon_console" {
				return cookie.Value
			}
		}
		t.Fatal("no session cookie")
		return ""
	}
	root := h.signedInWith(w.adminToken)
	late := h.signedIn("late", operator.RoleAdmin)
	_, err := h.pool.Exec(ctx, `UPDATE reckon_operator_sessions SET expires_at = now() - interval '1 second'
		WHERE operator_id = (SELECT id FROM reckon_operators WHERE name = 'late')`)
	require.NoError(t, err)
	fired := h.signedIn("fired", operator.RoleAdmin)
	_, err = h.operators.Revoke(ctx, "fired")
	require.NoError(t, err)
	valid := sessionID(root)
	random := make([]byte, 32)
	_, err = rand.Read(random)
	require.NoError(t, err)
	changed := []byte(valid) // one base64url character changed
	if changed[0] == 'A' {
		changed[0] = 'B'
	} else {
		changed[0] = 'A'
	}
	cookies := map[string]string{
		"random bytes":       string(random),
		"random token":       base64.RawURLEncoding.EncodeToString(random), // the form of a session id
		"NUL":                "\x00",
		"escaped NUL":        valid[:10] + "%00" + valid[10:],
		"NUL inside":         valid[:10] + "\x00" + valid[10:],
		"invalid UTF-8":      valid[:10] + "\xff" + valid[10:],
		"10k":                strings.Repeat("A", 10_000),
		"one more":           valid + "A",
		"one less":           valid[:len(valid)-1],
		"changed":            string(changed),
		"the CSRF token":     root.csrf,
		"the operator token": w.adminToken,
		"expired":            sessionID(late),
		"revoked operator":   sessionID(fired),
		"empty":              "",
	}
	before := h.snapshot()
	resolve := "/console/effects/" + w.stuck.ID.String() + "/resolve"
	form := url.Values{"to": {"FAILED"}, "reason": {"tampered"}, "csrf": {root.csrf}}.Encode()
	for name, value := range cookies {
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/console/overview", nil),
			httptest.NewRequest(http.MethodGet, "/console/effects/"+w.stuck.ID.String(), nil),
			httptest.NewRequest(http.MethodGet, "/console/operators", nil),
			httptest.NewRequest(http.MethodPost, resolve, strings.NewReader(form)),
			httptest.NewRequest(http.MethodPost, "/console/sign-out", strings.NewReader(form)),
		} {
			req.Header.Set("Cookie", "reckon_console="+value)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			p := h.serve(req)
			what := name + ": " + req.Method + " " + req.URL.Path
			require.Equal(t, http.StatusSeeOther, p.status, "%s: %s", what, p.body)
			require.Equal(t, "/console/sign-in", p.location(), what)
			require.Equal(t, before, h.snapshot(), what)
		}
		req := httptest.NewRequest(http.MethodGet, "/console/sign-in", nil)
		req.Header.Set("Cookie", "reckon_console="+value)
		p := h.serve(req)
		require.Equal(t, http.StatusOK, p.status, "%s: the sign-in form: %s", name, p.body)
		require.Contains(t, p.body, `<label for="token">`, name)
	}
	// The untampered cookie still works.
	req := httptest.NewRequest(http.MethodGet, "/console/overview", nil)
	req.Header.Set("Cookie", "reckon_console="+valid)
	require.Equal(t, http.StatusOK, h.serve(req).status)
}

// requireBadFormBodiesRefused: a POST to path (route pattern, case c) by b whose form is too large,
// or is not a urlencoded form, is refused (the CSRF token is in it) and changes nothing of before.
func requireBadFormBodiesRefused(t *testing.T, h *harness, b *browser, c routeCase, pattern, path, before string) {
	t.Helper()
	form := clone(c.form)
	form.Set("csrf", b.csrf)
	if c.least == public {
		form.Set("csrf", b.signInCSRF())
	}
	body := form.Encode()
	for _, post := range []struct{ contentType, body string }{
		{"application/x-www-form-urlencoded", body + "&pad=" + strings.Repeat("x", 1<<20)},
		{"text/plain", body},
		{"application/json", `{"csrf": "` + form.Get("csrf") + `", "reason": "json"}`},
		{"multipart/form-data; boundary=x", body},
		{"", body},
		{"application/x-www-form-urlencoded; charset", body},
		{"application/x-www-form-urlencoded", "%zz=%zz&" + body},
	} {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(post.body))
		if post.contentType != "" {
			req.Header.Set("Content-Type", post.contentType)
		}
		for _, cookie := range b.client.Jar.Cookies(mustURL(t, h.server.URL+path)) {
			req.AddCookie(cookie)
		}
		p := h.serve(req)
		what := pattern + " " + post.contentType + " body of " + short(post.body)
		requireSane(t, p, "", what)
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusForbidden, http.StatusRequestEntityTooLarge}, p.status, what)
		assert.Equal(t, before, h.snapshot(), "%s changed something", what)
	}
}
