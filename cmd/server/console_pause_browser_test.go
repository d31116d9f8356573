package main

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
)

// TestConsolePauseInBrowser drives an operator's pause of a connector in headless Chromium
// against the real server binary: an operator pauses an HTTP connector for every tenant, and for
// tenant acme, through the connector page's form (every control labelled), and sees each pause
// with who, why and since when, a banner on the page and the connector standing out on the list;
// a limit reset leaves the pauses; resuming acme's leaves every tenant's, and resuming that one
// ends the last. Every page is screenshotted.
func TestConsolePauseInBrowser(t *testing.T) {
	t.Parallel()
	browser, shots, server, pool, env := consoleRig(t)
	ctx := context.Background()
	olga := operatorToken(t, env, server, "olga", "-role", "operator")

	api, srv := startServer(t, env, server)
	base := api.base
	api.putConnector(systemToken(t, env, server), `{"name":"bank.wire","tags":["write","external","network"],
		"dispatch_url":"http://127.0.0.1:9/wires","status_url":"http://127.0.0.1:9/wires/status","timeout_ms":1000,"max_attempts":3}`)
	pauses := func() int {
		return testkit.Count(t, pool, `SELECT count(*) FROM reckon_connector_pauses WHERE connector = 'bank.wire'`)
	}

	op := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	op.signIn(olga)
	op.open("/console/connectors/bank.wire", "pause-connector-running")
	require.Contains(t, op.text(`section[aria-labelledby="pause-h"]`), "Not paused")
	require.Zero(t, op.count(".pause-banner"))

	// Pause it for every tenant through the form.
	form := `form.pause-form`
	op.requireLabelled(form, 3) // the tenant, the reason and the button
	submit := func(form, reason string, want string) {
		t.Helper()
		resp, err := chromedp.RunResponse(op.ctx,
			chromedp.Focus(form+" [name=reason]", chromedp.ByQuery), chromedp.KeyEvent(reason),
			chromedp.Click(form+" button", chromedp.ByQuery))
		require.NoError(t, err)
		require.EqualValues(t, http.StatusOK, resp.Status)
		require.Equal(t, "/console/connectors/bank.wire?done="+want, op.location())
	}
	submit(form, "bank maintenance 02:00-04:00", "paused")
	screenshot(t, op.ctx, shots, "pause-connector-paused")
	require.Contains(t, op.text("p.notice"), "Paused: no reactor starts a call of it")
	require.Contains(t, op.text(".pause-banner"), "Paused by an operator (every tenant).")
	row := op.text(`table.pauses tbody tr`)
	require.Regexp(t, `every tenant\s+console:olga\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(\d+s ago\)\s+bank maintenance 02:00-04:00`, row)
	require.Equal(t, 1, pauses())

	// And for tenant acme.
	op.run(chromedp.SendKeys("#pause-tenant", "acme", chromedp.ByQuery))
	submit(form, "acme under review", "paused")
	require.Equal(t, 2, op.count(`table.pauses tbody tr`))
	require.Contains(t, op.text(`table.pauses tbody tr:nth-child(2)`), "tenant acme")
	op.requireLabelled(`table.pauses tbody tr:nth-child(2) form.resume-form`, 2) // the reason and the button
	screenshot(t, op.ctx, shots, "pause-connector-two-pauses")

	// A limit reset does not end them.
	resp, err := chromedp.RunResponse(op.ctx, chromedp.Click(`form.limit-reset button`, chromedp.ByQuery))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Equal(t, 2, op.count(`table.pauses tbody tr`))
	require.Equal(t, 2, pauses())

	// The list: it stands out, paused by an operator.
	op.open("/console/connectors", "pause-connectors-paused")
	require.Equal(t, 1, op.count(`main tbody tr.throttled`))
	require.Equal(t, "paused by an operator (every tenant)", op.text(`main tbody tr.throttled .operator-paused`))

	// Resume acme's: every tenant's stays (no notice: a pause still holds it); then every tenant's.
	op.open("/console/connectors/bank.wire", "pause-connector-before-resume")
	submit(`table.pauses tbody tr:nth-child(2) form.resume-form`, "review done", "resumed")
	require.Zero(t, op.count("p.notice"))
	require.Equal(t, 1, op.count(`table.pauses tbody tr`))
	require.Contains(t, op.text(".pause-banner"), "every tenant")
	submit(`table.pauses tbody tr form.resume-form`, "maintenance over", "resumed")
	screenshot(t, op.ctx, shots, "pause-connector-resumed")
	require.Contains(t, op.text("p.notice"), "Resumed")
	require.Zero(t, op.count(".pause-banner"))
	require.Zero(t, pauses())
	var logged int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_connector_pause_log WHERE actor = 'console:olga'`).Scan(&logged))
	require.Equal(t, 4, logged)

	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
}
