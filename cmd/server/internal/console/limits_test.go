package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/internal/testkit"
)

// pause pauses connector's key of tenant ("" for the shared key) for a minute, as an upstream's
// Retry-After does.
func (h *harness) pause(connector, tenant string) {
	h.t.Helper()
	_, err := h.pool.Exec(context.Background(), `SELECT reckon_limit_release($1, $2, gen_random_uuid(), $2 <> '', 0, 30000, true, 60000)`,
		connector, tenant)
	require.NoError(h.t, err)
}

// limitRow is the operator's limit of connector as stored ("" when none).
func (h *harness) limitRow(connector string) string {
	h.t.Helper()
	var row string
	err := h.pool.QueryRow(context.Background(), `SELECT coalesce((SELECT concat_ws(' ', rate, per_ms, burst, max_in_flight, per_tenant,
		break_after, break_for_ms, set_by, reason) FROM reckon_connector_limits WHERE connector = $1), '')`, connector).Scan(&row)
	require.NoError(h.t, err)
	return row
}

// A paused connector stands out on the list and its page shows the pause; a viewer sees no form.
// An operator sets a limit through the form (shown with who and why), resets the pause, and
// clears the limit, each with a notice; bad values are a 400 naming the field and change nothing.
func TestConnectorLimits(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.pause("bank.wire", "")
	page := "/console/connectors/bank.wire"

	viewer := h.signedIn("vic", operator.RoleViewer)
	p := viewer.get("/console/connectors")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<tr class="throttled">`)
	require.Contains(t, p.body, `<strong class="throttle">paused</strong> unlimited`)
	p = viewer.get(page)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Throttled: paused.")
	require.Regexp(t, `<td>every tenant</td>\s*<td>closed</td>\s*<td><strong class="throttle">[0-9-]+ [0-9:]+Z</strong> \(in [45][0-9]s\)`, p.body)
	require.NotContains(t, p.body, "<form method=\"post\" action=\"/console/connectors/", "a viewer gets no forms")
	require.Equal(t, http.StatusForbidden, viewer.post(page+"/limit/reset", url.Values{}).status)
	require.Equal(t, http.StatusNotFound, viewer.get("/console/connectors/no.such").status)

	op := h.signedIn("opal", operator.RoleOperator)
	p = op.get(page)
	require.Contains(t, p.body, `action="/console/connectors/bank.wire/limit"`)
	require.NotContains(t, p.body, `action="/console/connectors/bank.wire/limit/clear"`, "nothing to clear yet")
	for _, bad := range []struct {
		field string
		form  url.Values
	}{
		{"rate", url.Values{"rate": {"-1"}, "reason": {"r"}}},
		{"burst", url.Values{"burst": {"1000001"}, "reason": {"r"}}},
		{"per", url.Values{"rate": {"1"}, "per": {"2h"}, "reason": {"r"}}},
		{"break_for", url.Values{"break_after": {"3"}, "break_for": {"soon"}, "reason": {"r"}}},
		{"per_tenant", url.Values{"per_tenant": {"yes"}, "reason": {"r"}}},
		{"reason", url.Values{"rate": {"5"}}},
		{"reason", url.Values{"rate": {"5"}, "reason": {"a\x00b"}}},
		{"reason", url.Values{"rate": {"5"}, "reason": {"\xff"}}},
		{"reason", url.Values{"rate": {"5"}, "reason": {strings.Repeat("x", 3000)}}},
	} {
		p := op.post(page+"/limit", bad.form)
		require.Equal(t, http.StatusBadRequest, p.status, "%s: %s", bad.field, p.body)
		require.Contains(t, p.body, "<strong>"+bad.field+"</strong>", bad.field)
	}
	require.Equal(t, "", h.limitRow("bank.wire"), "nothing set by bad input")
	require.Equal(t, http.StatusNotFound, op.post("/console/connectors/no.such/limit", url.Values{"rate": {"5"}, "reason": {"r"}}).status)
	require.Equal(t, 0, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_connector_limits`))

	p = op.post(page+"/limit", url.Values{"rate": {"20"}, "per": {"1m"}, "max_in_flight": {"4"}, "per_tenant": {"on"},
		"break_after": {"5"}, "break_for": {"45s"}, "reason": {"the bank asked us to slow down"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, page+"?done=set", p.location())
	require.Equal(t, "20 60000 20 4 t 5 45000 operator:console:opal the bank asked us to slow down", h.limitRow("bank.wire"))
	p = op.get(p.location())
	require.Contains(t, p.body, "Set the operator&#39;s limit")
	require.Contains(t, p.body, "<strong>20/1m0s burst 20, 4 in flight, breaks after 5 for 45s, per tenant</strong>, set by <strong>operator:console:opal</strong>")
	require.Contains(t, p.body, "the bank asked us to slow down")
	require.Contains(t, p.body, `id="limit-rate" name="rate" inputmode="numeric" value="20"`, "the form shows the limit in effect")
	require.Contains(t, viewer.get("/console/connectors").body, "20/1m0s burst 20, 4 in flight, breaks after 5 for 45s, per tenant <span class=\"note\">(operator's)</span>")

	// Reset ends the pause; a second reset has nothing to do.
	p = op.post(page+"/limit/reset", url.Values{})
	require.Equal(t, page+"?done=reset", p.location(), p.body)
	p = op.get(p.location())
	require.Contains(t, p.body, "Reset: circuits closed, pauses ended")
	require.NotContains(t, p.body, "Throttled")
	require.NotContains(t, viewer.get("/console/connectors").body, `class="throttled"`)
	require.Equal(t, page+"?done=not-throttled", op.post(page+"/limit/reset", url.Values{}).location())

	// Clear; a second clear has nothing to clear.
	p = op.post(page+"/limit/clear", url.Values{})
	require.Equal(t, page+"?done=cleared", p.location(), p.body)
	require.Equal(t, "", h.limitRow("bank.wire"))
	require.Contains(t, op.get(p.location()).body, "Cleared the operator&#39;s limit")
	require.Equal(t, page+"?done=not-set", op.post(page+"/limit/clear", url.Values{}).location())

	// A link cannot make the page announce what did not happen.
	require.NotContains(t, op.get(page+"?done=set").body, `class="notice"`, "no operator's limit")
	h.pause("bank.wire", "")
	require.NotContains(t, op.get(page+"?done=reset").body, `class="notice"`, "paused")
	require.NotContains(t, op.get(page+"?done=nope").body, `class="notice"`)
}

// Limits are shared by every tenant: an operator scoped to acme sees the shared key and acme's,
// not globex's, gets no forms, and its changes are refused (403) and change nothing.
func TestConnectorLimitsScoped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.pause("bank.wire", "globex")
	h.pause("bank.wire", "acme")
	page := "/console/connectors/bank.wire"
	ann := h.signedIn("ann", operator.RoleOperator, "acme")
	p := ann.get(page)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "tenant acme")
	require.NotContains(t, p.body, "globex")
	require.NotContains(t, p.body, "<form method=\"post\" action=\"/console/connectors/")
	for _, action := range []string{"/limit", "/limit/clear", "/limit/reset"} {
		p := ann.post(page+action, url.Values{"rate": {"1"}, "reason": {"mine"}})
		require.Equal(t, http.StatusForbidden, p.status, action)
		require.Contains(t, p.body, "shared by every tenant", action)
	}
	require.Equal(t, "", h.limitRow("bank.wire"))
	require.Equal(t, 2, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_limit_state WHERE paused_until > now()`))

	root := h.signedIn("root", operator.RoleAdmin)
	require.Contains(t, root.get(page).body, "tenant globex", "what acme's operator must not see is there")
}
