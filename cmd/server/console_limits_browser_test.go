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

// TestConsoleLimitsInBrowser drives a connector's limits in headless Chromium against the real
// server binary: an HTTP connector whose definition limits it (5/s, 2 in flight) is paused for a
// minute, as an upstream's Retry-After would. An operator sees it stand out on the connectors
// list as paused, opens its page (the pause in its key's row, its own limit from the definition,
// no operator's limit), sets an operator's limit through the form (every control labelled) and
// sees it with who set it and why, then resets the connector and sees the pause gone. Every page
// is screenshotted.
func TestConsoleLimitsInBrowser(t *testing.T) {
	t.Parallel()
	browser, shots, server, pool, env := consoleRig(t)
	ctx := context.Background()
	olga := operatorToken(t, env, server, "olga", "-role", "operator")

	api, srv := startServer(t, env, server)
	base := api.base
	api.putConnector(systemToken(t, env, server), `{"name":"bank.wire","tags":["write","external","network"],
		"dispatch_url":"http://127.0.0.1:9/wires","status_url":"http://127.0.0.1:9/wires/status","timeout_ms":1000,"max_attempts":3,"limit":{"rate":5,"max_in_flight":2}}`)
	_, err := pool.Exec(ctx, `SELECT reckon_limit_release('bank.wire', '', gen_random_uuid(), false, 0, 30000, true, 60000)`)
	require.NoError(t, err)
	paused := func() bool {
		return testkit.Count(t, pool, `SELECT count(*) FROM reckon_limit_state WHERE connector = 'bank.wire' AND paused_until > now()`) > 0
	}
	require.True(t, paused())

	// The list: bank.wire's row stands out, paused.
	op := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	op.signIn(olga)
	op.open("/console/connectors", "limits-connectors-paused")
	row := `main tbody tr.throttled`
	require.Equal(t, 1, op.count(row))
	require.Contains(t, op.text(row), "bank.wire")
	require.Equal(t, "paused", op.text(row+" .throttle"))
	require.Contains(t, op.text(row), "5/1s burst 5, 2 in flight", "its own limit, from its definition")
	var background string
	op.run(chromedp.Evaluate(`getComputedStyle(document.querySelector("main tbody tr.throttled")).backgroundColor`, &background))
	require.Equal(t, "rgb(255, 235, 233)", background, "the STUCK colour: it stands out")

	// Its page: the banner, the paused key, its own limit, no operator's.
	op.run(chromedp.Click(`a[href="/console/connectors/bank.wire"]`, chromedp.ByQuery), chromedp.WaitVisible(`#limit-h`, chromedp.ByQuery))
	require.Equal(t, "/console/connectors/bank.wire", op.location())
	screenshot(t, op.ctx, shots, "limits-connector-paused")
	require.Contains(t, op.text(".throttle-banner"), "Throttled: paused.")
	key := op.text(`section[aria-labelledby="limit-h"] tbody tr`)
	require.Regexp(t, `every tenant\s+closed\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(in (?:1m00s|[1-5]\ds)\)`, key)
	facts := op.text(`section[aria-labelledby="limit-h"] dl`)
	require.Regexp(t, `Its own\s+5/1s burst 5, 2 in flight \(its definition's\)`, facts)
	require.Regexp(t, `Operator's\s+none`, facts)

	// Set an operator's limit through the form.
	form := `form.limit-form`
	op.requireLabelled(form, 9) // seven fields, the reason and the button
	reason := "the bank asked for 1 a second"
	op.run(
		chromedp.Clear("#limit-rate", chromedp.ByQuery), chromedp.SendKeys("#limit-rate", "1", chromedp.ByQuery),
		chromedp.Clear("#limit-max-in-flight", chromedp.ByQuery), chromedp.SendKeys("#limit-max-in-flight", "1", chromedp.ByQuery),
		chromedp.Clear("#limit-burst", chromedp.ByQuery),
		chromedp.Focus("#limit-reason", chromedp.ByQuery), chromedp.KeyEvent(reason),
		chromedp.Click(form+" button", chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery),
	)
	require.Equal(t, "/console/connectors/bank.wire?done=set", op.location())
	screenshot(t, op.ctx, shots, "limits-connector-set")
	require.Contains(t, op.text("p.notice"), "Set the operator's limit")
	facts = op.text(`section[aria-labelledby="limit-h"] dl`)
	require.Regexp(t, `In effect\s+1/1s burst 1, 1 in flight \(operator's\)`, facts)
	require.Contains(t, facts, "set by operator:console:olga")
	require.Contains(t, facts, reason)
	var setBy string
	require.NoError(t, pool.QueryRow(ctx, `SELECT set_by FROM reckon_connector_limits WHERE connector = 'bank.wire' AND rate = 1 AND max_in_flight = 1`).Scan(&setBy))
	require.Equal(t, "operator:console:olga", setBy)
	require.True(t, paused(), "setting a limit does not end the pause")

	// Reset: the pause is gone, on the page and in the database.
	// (The set's notice is on the page still: wait for the reset's answer, not for a notice.)
	resp, err := chromedp.RunResponse(op.ctx, chromedp.Click(`form.limit-reset button`, chromedp.ByQuery))
	require.NoError(t, err)
	require.EqualValues(t, http.StatusOK, resp.Status)
	require.Equal(t, "/console/connectors/bank.wire?done=reset", op.location())
	screenshot(t, op.ctx, shots, "limits-connector-reset")
	require.Equal(t, 1, op.count("p.notice"), "the notice: the reset happened")
	require.Contains(t, op.text("p.notice"), "Reset: circuits closed, pauses ended")
	require.Zero(t, op.count(".throttle-banner"))
	require.Regexp(t, `every tenant\s+closed\s+—`, op.text(`section[aria-labelledby="limit-h"] tbody tr`))
	require.False(t, paused())
	op.open("/console/connectors", "limits-connectors-reset")
	require.Zero(t, op.count(`main tbody tr.throttled`))
	require.Contains(t, op.text("main tbody"), "1/1s burst 1, 1 in flight (operator's)")

	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
}
