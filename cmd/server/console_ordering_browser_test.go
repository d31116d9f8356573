package main

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestConsoleOrderingInBrowser: a stored HTTP connector makes its effects' ordering key of an
// args field (ordering_key_fields); three wires of one order are enqueued through the API, and the
// first ends STUCK (no reactor runs: the test moves it). An operator opens the third: the page
// names the ordering key, says it is held by the STUCK one (a link to it) and lists the chain in
// the order of the turns; the STUCK one's page says it has the key's turn. Both are screenshotted.
func TestConsoleOrderingInBrowser(t *testing.T) {
	t.Parallel()
	browser, shots, server, pool, env := consoleRig(t)
	acme := tenantToken(t, env, server, "acme")
	alice := operatorToken(t, env, server, "alice", "-role", "operator")
	api, srv := startServer(t, env, server)
	base := api.base

	r := api.putConnector(systemToken(t, env, server), `{"name":"demo.bank.wire","tags":["write","external","network"],
		"dispatch_url":"http://127.0.0.1:9/wires","status_url":"http://127.0.0.1:9/wires/status","ordering_key_fields":["order"]}`)
	require.Equal(t, []any{"order"}, r.body["ordering_key_fields"])
	var ids []string
	for _, key := range []string{"ship-1", "ship-2", "ship-3"} {
		r := api.do("POST", "/v1/effects", acme, `{"connector":"demo.bank.wire","idempotency_key":"`+key+`",
			"args":{"order":"order-77","account":"acc-1","amount":500}}`)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		require.Equal(t, "order-77", r.body["ordering_key"], "made of the args by the connector")
		ids = append(ids, r.body["id"].(string))
	}
	for _, to := range []string{"UNKNOWN", "STUCK"} {
		_, err := pool.Exec(context.Background(), `UPDATE reckon_effects SET state = $2, transition_actor = 'reactor:test',
			transition_reason = 'outcome unknown' WHERE id = $1`, ids[0], to)
		require.NoError(t, err)
	}

	op := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	op.signIn(alice)
	op.open("/console/effects/"+ids[2], "ordering-held-by")
	require.Contains(t, op.text("#order-h"), "order-77")
	held := op.text("p.held-by")
	require.Contains(t, held, "Held by demo.bank.wire …"+ids[0][len(ids[0])-12:])
	require.Contains(t, held, "STUCK")
	require.Equal(t, 3, op.count("ol.chain li"))
	require.Contains(t, op.text("ol.chain li:first-child"), "has the turn")
	require.Contains(t, op.text("ol.chain li:last-child"), "this effect")

	op.run(chromedp.Click(`p.held-by a`, chromedp.ByQuery), chromedp.WaitVisible(`#order-h`, chromedp.ByQuery))
	screenshot(t, op.ctx, shots, "ordering-holder")
	require.Contains(t, op.location(), ids[0])
	require.Zero(t, op.count("p.held-by"))
	require.Contains(t, op.text("main"), "This effect has the key's turn")
	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
}
