package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// TestConsoleConfirmationInBrowser drives confirmation holds in headless Chromium against the real
// server and reactor binaries and a fake bank: two wires are enqueued through the API to be held
// for a person's confirmation (one with an expiry) and the bank hears of neither. An operator
// sees them counted on the overview and listed oldest first on the awaiting page with their
// prompts, opens the first, sees the prompt, who enqueued it and its Confirm and Decline forms
// (every control labelled), and confirms it with a reason: the page shows the decision, and the
// reactor sends the wire. Another operator, whose page of that wire was opened before, is told it
// was decided already; it declines the second wire, which becomes FAILED and never reaches the
// bank. The awaiting page is then empty. Every page is screenshotted.
func TestConsoleConfirmationInBrowser(t *testing.T) {
	t.Parallel()
	started := time.Now()
	browser, shots, server, pool, env := consoleRig(t)
	acme := tenantToken(t, env, server, "acme")
	alice := operatorToken(t, env, server, "alice", "-role", "operator")
	bob := operatorToken(t, env, server, "bob", "-role", "operator")

	api, srv := startServer(t, env, server)
	base := api.base
	reactor := startFastReactor(t, env)

	bank := fakebank.New(t)
	api.putConnectorFor(reactor, systemToken(t, env, server), bankWire(bank))

	ids := map[string]string{}
	for _, w := range []struct{ key, extra string }{
		{"hold-refund", ``},
		{"hold-payout", `,"confirmation_ttl_ms":7200000`},
	} {
		r := api.do("POST", "/v1/effects", acme, `{"connector":"demo.bank.wire","idempotency_key":"`+w.key+`",
			"args":{"account":"acc-`+w.key+`","amount":500},"require_confirmation":true`+w.extra+`}`)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		ids[w.key] = r.body["id"].(string)
	}
	refund, payout := ids["hold-refund"], ids["hold-payout"]
	hold := func(id string) (state, confirmation, by, reason string) { return confirmationHold(t, pool, id) }

	// The overview counts them; the awaiting page lists them oldest first, with their prompts.
	op := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	op.signIn(alice)
	require.Equal(t, "/console/overview", op.location(), "nothing STUCK: the landing page is the overview")
	screenshot(t, op.ctx, shots, "confirm-overview")
	requireAwaitingListed(t, op, refund, payout)
	require.Zero(t, bank.Count("hold-refund")+bank.Count("hold-payout"), "held: the bank heard of neither")

	// Bob opens the refund's page now, and decides later.
	other := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	other.signIn(bob)
	other.open("/console/effects/"+refund, "")

	// Alice opens it: the prompt, who enqueued it, its forms; she confirms it.
	reason := "the customer confirmed on the phone"
	confirmOnPage(t, op, refund, reason)
	state, confirmation, by, why := hold(refund)
	require.Equal(t, []string{"CONFIRMED", "operator:console:alice", reason}, []string{confirmation, by, why}, state)
	require.Eventually(t, func() bool { state, _, _, _ = hold(refund); return state == "CONFIRMED" }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, bank.Count("hold-refund"), "confirmed: the reactor sent the wire once")

	// Bob's page is stale: his confirmation is refused with a message, not an error.
	other.run(chromedp.Focus("#confirm-reason", chromedp.ByQuery), chromedp.KeyEvent("me too"),
		chromedp.Click(`form[action$="/confirm"] button`, chromedp.ByQuery), chromedp.WaitVisible(`.problem`, chromedp.ByQuery))
	screenshot(t, other.ctx, shots, "confirm-already-decided")
	require.Contains(t, other.text(".problem"), "does not await a confirmation (any more)")
	require.Contains(t, other.text("h1"), "409")
	_, _, by, _ = hold(refund)
	require.Equal(t, "operator:console:alice", by)

	// Bob declines the payout: FAILED, never sent.
	other.open("/console/awaiting", "")
	require.Equal(t, 1, other.count(`main tbody tr`))
	other.run(chromedp.Click(`a[href="/console/effects/`+payout+`"]`, chromedp.ByQuery), chromedp.WaitVisible(`#hold-h`, chromedp.ByQuery))
	require.Contains(t, other.text(`section[aria-labelledby="hold-h"]`), "then FAILED")
	other.run(chromedp.Focus("#decline-reason", chromedp.ByQuery), chromedp.KeyEvent("payee not verified"),
		chromedp.Click(`form[action$="/decline"] button`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	screenshot(t, other.ctx, shots, "confirm-declined")
	require.Contains(t, other.text("p.lead"), "FAILED")
	require.Contains(t, other.text(`section[aria-labelledby="hold-h"]`), "declined")
	require.Contains(t, other.text("ol.timeline"), "declined: payee not verified")
	state, confirmation, by, why = hold(payout)
	require.Equal(t, []string{"FAILED", "DECLINED", "operator:console:bob", "payee not verified"}, []string{state, confirmation, by, why})

	// None left; the effects list shows both decisions.
	op.open("/console/awaiting", "confirm-awaiting-empty")
	require.Contains(t, op.text("main"), "No effect awaits a confirmation.")
	op.open("/console/effects?tenant=acme", "confirm-effects")
	list := op.text("main table")
	require.Contains(t, list, "confirmed by a person")
	require.Contains(t, list, "declined")
	time.Sleep(300 * time.Millisecond) // a sweep or a poll would have sent it by now
	require.Zero(t, bank.Count("hold-payout"), "declined: never sent")
	require.NotContains(t, reactor.Stderr(), "panic")

	t.Logf("screenshots in %s; whole test %v", shots, time.Since(started).Round(time.Millisecond))
	stopBoth(t, srv, reactor)
}

// confirmationHold reads the effect id's state and its confirmation: the decision, by whom, why.
func confirmationHold(t *testing.T, pool *pgxpool.Pool, id string) (state, confirmation, by, reason string) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state::text, coalesce(confirmation, ''), coalesce(confirmation_by, ''),
		coalesce(confirmation_reason, '') FROM reckon_effects WHERE id = $1`, id).Scan(&state, &confirmation, &by, &reason))
	return state, confirmation, by, reason
}

// requireAwaitingListed: the overview (op's page) counts the two held wires, and the awaiting page
// lists them oldest first (refund, then payout) with their prompts and expiries.
func requireAwaitingListed(t *testing.T, op consoleTab, refund, payout string) {
	t.Helper()
	shots := op.shots
	card := op.text(`a[href="/console/awaiting"].value`)
	require.Equal(t, "2", card)
	op.run(chromedp.Click(`nav a[href="/console/awaiting"]`, chromedp.ByQuery), chromedp.WaitVisible(`main table`, chromedp.ByQuery))
	require.Equal(t, "/console/awaiting", op.location())
	screenshot(t, op.ctx, shots, "confirm-awaiting")
	require.Contains(t, op.text("main p"), "2 effects await their confirmation")
	require.Equal(t, 2, op.count(`main tbody tr`))
	var rows []string
	op.run(chromedp.Evaluate(`[...document.querySelectorAll("main tbody tr")].map(tr => tr.innerText)`, &rows))
	require.Contains(t, rows[0], refund[24:], "the oldest first")
	require.Contains(t, rows[1], payout[24:])
	for _, row := range rows {
		require.Contains(t, row, "Confirm demo.bank.wire?")
	}
	require.Contains(t, rows[0], "never")
	require.Regexp(t, `in 1h5\dm`, rows[1], "the payout's expiry")
}

// confirmOnPage: op opens the held effect refund from the awaiting page, sees its prompt, who
// enqueued it and its labelled Confirm and Decline forms, and confirms it with reason; the page then
// shows the decision and no form.
func confirmOnPage(t *testing.T, op consoleTab, refund, reason string) {
	t.Helper()
	shots := op.shots
	op.run(chromedp.Click(`a[href="/console/effects/`+refund+`"]`, chromedp.ByQuery), chromedp.WaitVisible(`#hold-h`, chromedp.ByQuery))
	require.Equal(t, "/console/effects/"+refund, op.location())
	screenshot(t, op.ctx, shots, "confirm-effect-before")
	require.Equal(t, "Confirm demo.bank.wire?", op.text("p.prompt"))
	hold1 := op.text(`section[aria-labelledby="hold-h"]`)
	require.Contains(t, hold1, "awaiting confirmation")
	require.Regexp(t, `Enqueued by\s+api:`, hold1, "the API's caller enqueued it")
	require.Regexp(t, `Expires\s+never`, hold1)
	confirm, decline := `form[action="/console/effects/`+refund+`/confirm"]`, `form[action="/console/effects/`+refund+`/decline"]`
	op.requireLabelled(confirm, 2) // the reason and the button
	op.requireLabelled(decline, 2)
	require.Zero(t, op.count(`form[action$="/cancel"]`), "Decline, not Cancel, for an awaiting effect")
	op.run(chromedp.Focus("#confirm-reason", chromedp.ByQuery), chromedp.KeyEvent(reason),
		chromedp.Click(confirm+" button", chromedp.ByQuery), chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	screenshot(t, op.ctx, shots, "confirm-effect-after")
	require.Contains(t, op.text("p.notice"), "Confirmed")
	decided := op.text(`section[aria-labelledby="hold-h"]`)
	require.Contains(t, decided, "confirmed by a person")
	require.Contains(t, decided, "operator:console:alice")
	require.Contains(t, decided, reason)
	require.Zero(t, op.count(confirm+", "+decline), "no forms once decided")
}
