package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestConsoleSchedulesInBrowser shows the Schedules page in headless Chromium against the real
// server and reactor binaries: an every-second schedule of an HTTP connector, which the reactor's
// scheduler enqueues, and a disabled cron schedule of another tenant. The page lists both with their
// tenant, connector, spec, policy and next tick; the first's last effect links to the effect's
// page; an operator scoped to globex sees globex's only. Every page is screenshotted.
func TestConsoleSchedulesInBrowser(t *testing.T) {
	t.Parallel()
	browser, shots, server, pool, env := consoleRig(t)
	ctx := context.Background()
	olga := operatorToken(t, env, server, "olga", "-role", "operator")
	sam := operatorToken(t, env, server, "sam", "-role", "viewer", "-tenants", "globex")

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	base := "http://" + srv.Addr(t)
	reactor := proctest.Start(t, env, proctest.Binary(t, "reactor"), "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms")
	reactor.Addr(t)
	api := apiClient{t: t, base: base}
	system := systemToken(t, env, server)
	r := api.do("POST", "/v1/connectors", system, `{"name":"report.run","tags":["idempotent"],"dispatch_url":"http://127.0.0.1:9/reports","timeout_ms":1000,"max_attempts":2}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	r = api.do("PUT", "/v1/schedules/acme/heartbeat", system, `{"connector":"report.run","interval_seconds":1,"missed":"catch_up","args":{"report":"hb"}}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	r = api.do("PUT", "/v1/schedules/globex/nightly-settlement", system, `{"connector":"report.run","cron":"0 2 * * *","enabled":false}`)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	var effectID string
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT last_effect_id::text FROM reckon_schedules WHERE name = 'heartbeat' AND last_effect_id IS NOT NULL`).Scan(&effectID) == nil
	}, 30*time.Second, 50*time.Millisecond, "the reactor's scheduler enqueues a tick")

	op := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	op.signIn(olga)
	op.open("/console/schedules", "schedules")
	require.Equal(t, "Schedules", op.text(`nav a[aria-current="page"]`))
	require.Equal(t, 2, op.count("main tbody tr"))
	heartbeat := op.text("main tbody tr:nth-child(1)")
	require.Regexp(t, `heartbeat\s+acme\s+report\.run\s+every 1s\s+catch_up\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`, heartbeat)
	require.Regexp(t, `…[0-9a-f]{12} for \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`, heartbeat, "the last tick's effect")
	nightly := op.text("main tbody tr:nth-child(2)")
	require.Regexp(t, `nightly-settlement \(disabled\)\s+globex\s+report\.run\s+0 2 \* \* \*\s+skip\s+—\s+—`, nightly)

	link := `main tbody tr:nth-child(1) a[href^="/console/effects/"]`
	op.run(chromedp.Click(link, chromedp.ByQuery), chromedp.WaitVisible(`main h1`, chromedp.ByQuery))
	require.Regexp(t, `^/console/effects/[0-9a-f-]{36}$`, op.location())
	screenshot(t, op.ctx, shots, "schedules-effect")
	require.Contains(t, op.text("main"), "schedule/heartbeat/", "the tick's idempotency key")

	scoped := consoleTab{t: t, ctx: newTab(t, browser), base: base, shots: shots}
	scoped.signIn(sam)
	scoped.open("/console/schedules", "schedules-scoped")
	require.Equal(t, 1, scoped.count("main tbody tr"))
	require.Contains(t, scoped.text("main tbody"), "nightly-settlement")

	stopBoth(t, srv, reactor)
}
