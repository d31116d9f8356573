package main

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// TestConsoleRedriveInBrowser drives redrive in headless Chromium against the real server and
// reactor binaries and a fake bank: during a bank outage three wires are rejected and end FAILED.
// The outage over, an operator opens one, sees its Redrive form (every control labelled) and
// redrives it with a reason: the page says so, the timeline shows FAILED → PENDING by
// operator:console:alice, and the reactor sends the wire, which is CONFIRMED. From the effects
// list filtered to FAILED the operator previews a bulk redrive of the other two, confirms it, and
// both are sent and CONFIRMED. A viewer has no Redrive form and its forged POST is 403. Every page
// is screenshotted.
func TestConsoleRedriveInBrowser(t *testing.T) {
	t.Parallel()
	started := time.Now()
	browser, shots, server, pool, env := consoleRig(t)
	acme := tenantToken(t, env, server, "acme")
	alice := operatorToken(t, env, server, "alice", "-role", "operator")
	victor := operatorToken(t, env, server, "victor", "-role", "viewer")

	api, srv := startServer(t, env, server)
	base := api.base
	reactor := startFastReactor(t, env)

	bank := fakebank.New(t)
	bank.SetDefault(fakebank.Reject) // the outage: every wire is refused
	api.putConnectorFor(reactor, systemToken(t, env, server), bankWire(bank))

	ids := map[string]string{}
	for _, key := range []string{"outage-1", "outage-2", "outage-3"} {
		r := api.do("POST", "/v1/effects", acme, `{"connector":"demo.bank.wire","idempotency_key":"`+key+`","args":{"account":"acc-1","amount":500}}`)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		ids[key] = r.body["id"].(string)
	}
	for _, id := range ids {
		require.Eventually(t, func() bool { return stateOf(t, pool, id) == "FAILED" }, 30*time.Second, 50*time.Millisecond)
	}
	bank.SetDefault(fakebank.Succeed) // the outage is over

	// A viewer sees no Redrive form, and a forged one is refused.
	viewer := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	viewer.signIn(victor)
	viewer.open("/console/effects/"+ids["outage-1"], "")
	require.Zero(t, viewer.count(`form[action$="/redrive"]`))
	require.Equal(t, http.StatusForbidden, viewer.fetchPost("/console/effects/"+ids["outage-1"]+"/redrive",
		url.Values{"csrf": {viewer.csrf()}, "reason": {"forged"}}))
	require.Equal(t, "FAILED", stateOf(t, pool, ids["outage-1"]))

	// One, from its page.
	op := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	op.signIn(alice)
	op.open("/console/effects/"+ids["outage-1"], "redrive-failed-effect")
	op.requireLabelled(`form[action$="/redrive"]`, 2) // the reason and the button
	op.run(chromedp.Focus("#redrive-reason", chromedp.ByQuery), chromedp.KeyEvent("bank outage over"),
		chromedp.Click(`form[action$="/redrive"] button`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	screenshot(t, op.ctx, shots, "redrive-done")
	require.Contains(t, op.text("p.notice"), "Redriven")
	require.Contains(t, op.text("ol.timeline"), "redrive: bank outage over")
	require.Contains(t, op.text("ol.timeline"), "operator:console:alice")
	require.Eventually(t, func() bool { return stateOf(t, pool, ids["outage-1"]) == "CONFIRMED" }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, bank.Count("outage-1"), "sent once, after the redrive")

	// The others, in bulk from the FAILED list: a preview, then the confirmation.
	op.open("/console/effects?state=FAILED&tenant=acme", "redrive-failed-list")
	op.run(chromedp.Click(`a[href^="/console/bulk?action=redrive"]`, chromedp.ByQuery), chromedp.WaitVisible(`#bulk-reason`, chromedp.ByQuery))
	screenshot(t, op.ctx, shots, "redrive-bulk-preview")
	require.Contains(t, op.text("p.lead"), "2 FAILED effects will be redriven")
	require.Equal(t, 2, op.count(`main tbody tr`))
	op.requireLabelled(`form[action="/console/bulk"]`, 2)
	op.run(chromedp.Focus("#bulk-reason", chromedp.ByQuery), chromedp.KeyEvent("bank outage over"),
		chromedp.Click(`form[action="/console/bulk"] button`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	screenshot(t, op.ctx, shots, "redrive-bulk-done")
	require.Contains(t, op.text("p.notice"), "2 effects redriven")
	for _, key := range []string{"outage-2", "outage-3"} {
		require.Eventually(t, func() bool { return stateOf(t, pool, ids[key]) == "CONFIRMED" }, 30*time.Second, 50*time.Millisecond)
		require.Equal(t, 1, bank.Count(key))
	}
	require.NotContains(t, reactor.Stderr(), "panic")

	t.Logf("screenshots in %s; whole test %v", shots, time.Since(started).Round(time.Millisecond))
	stopBoth(t, srv, reactor)
}

// stateOf reads the state of the effect id.
func stateOf(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	var state string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state::text FROM reckon_effects WHERE id = $1`, id).Scan(&state))
	return state
}
