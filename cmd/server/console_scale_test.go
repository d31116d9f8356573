package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/console"
	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestConsoleAtScale times the console's pages over HTTP (the console's handler as the server
// builds it, on a test HTTP server) on a large database, and checks the plans of every query they
// run: no page may scan reckon_effects sequentially, and the overview and the STUCK queue must
// answer within 200 ms (median). It runs only with RECKON_CONSOLE_BIG_DATABASE_URL, a migrated
// database loaded by scripts/load-effects.sql (1,000,000 effects by default), which it leaves as
// it found it (its operator is revoked at the end):
//
//	server migrate up -create-db -database-url .../reckon_1m
//	psql .../reckon_1m -v ON_ERROR_STOP=1 -f scripts/load-effects.sql
//	RECKON_CONSOLE_BIG_DATABASE_URL=postgres://postgres@127.0.0.1:5432/reckon_1m \
//	  go test -count=1 -run TestConsoleAtScale -v ./cmd/server
//
// Each page is fetched 8 times first (prepared statements pass the 5 executions after which
// Postgres may choose a generic plan), then timed over 40 fetches. The plans are those of a second
// console whose single connection has auto_explain on, sending every plan to the client.
func TestConsoleAtScale(t *testing.T) {
	big := os.Getenv("RECKON_CONSOLE_BIG_DATABASE_URL")
	if big == "" {
		t.Skip("RECKON_CONSOLE_BIG_DATABASE_URL is not set (a database loaded by scripts/load-effects.sql)")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, big)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	n := testkit.Count(t, pool, `SELECT count(*) FROM reckon_effects`)
	t.Logf("reckon_effects: %d rows", n)

	name := "scale-" + uuid.NewString()[:8]
	store := operator.NewStore(pool)
	token, _, err := store.Add(ctx, name, operator.RoleAdmin, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = store.Revoke(context.Background(), name) })

	pages := scalePages(t, pool)

	timing := scaleConsole(t, pool)
	cookie := scaleSignIn(t, timing, token)
	get := func(base, path string) (time.Duration, string) {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		req.AddCookie(cookie)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		elapsed := time.Since(start)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		return elapsed, string(body)
	}
	_, first := get(timing, "/console/effects")
	next := strings.Index(first, `rel="next"`)
	require.Positive(t, next, "the first page of effects has a Next link")
	href := first[strings.LastIndex(first[:next], `href="`)+len(`href="`):]
	page2 := slices.IndexFunc(pages, func(p scalePage) bool { return p.name == "effects, page 2" })
	pages[page2].path = strings.ReplaceAll(href[:strings.Index(href, `"`)], "&amp;", "&")

	// Plans: a console on one connection that sends every statement's plan to the client.
	var plans planRecorder
	explained := explainingPool(t, big, &plans)
	explaining := scaleConsole(t, explained)

	var report []string
	for _, page := range pages {
		for range 8 {
			get(timing, page.path)
		}
		var times []time.Duration
		for range 40 {
			elapsed, _ := get(timing, page.path)
			times = append(times, elapsed)
		}
		slices.Sort(times)
		median, p95 := times[len(times)/2], times[len(times)*95/100]

		plans.reset()
		for range 7 {
			get(explaining, page.path)
		}
		all := plans.snapshot()
		pagePlans := all[len(all)*6/7:] // the last fetch's, past the switch to generic plans
		var scans []string
		for _, plan := range pagePlans {
			for _, line := range strings.Split(plan, "\n") {
				if strings.Contains(line, "Seq Scan on reckon_effects ") || strings.HasSuffix(line, "Seq Scan on reckon_effects") {
					scans = append(scans, plan)
				}
			}
		}
		require.Empty(t, scans, "%s: a sequential scan of reckon_effects", page.name)
		report = append(report, fmt.Sprintf("%-32s median %7.1f ms  p95 %7.1f ms  max %7.1f ms  %d statements, %s",
			page.name, ms(median), ms(p95), ms(times[len(times)-1]), len(pagePlans), scanSummary(pagePlans)))
		if median > 200*time.Millisecond {
			t.Logf("%s: median %.1f ms; its plans:\n%s", page.name, ms(median), strings.Join(pagePlans, "\n"))
		}
		if page.name == "overview" || page.name == "STUCK queue" {
			require.Less(t, median, 200*time.Millisecond, "%s: median page load", page.name)
		}
	}
	t.Logf("console pages on %d effects (GET over HTTP, 40 each after 8 to warm up):\n%s", n, strings.Join(report, "\n"))
}

// scaleConsole serves a console on pool, built as the server builds it, and returns its URL.
func scaleConsole(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	built, err := newEngine(pool, logger, nil, nil)
	require.NoError(t, err)
	c, err := console.New(&console.Config{Ops: ops.New(pool, built.Effects, built.Sagas, built.Turns), Operators: operator.NewStore(pool), Logger: logger})
	require.NoError(t, err)
	mux := http.NewServeMux()
	c.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// scaleSignIn signs in with token through the form and returns the session cookie.
func scaleSignIn(t *testing.T, base, token string) *http.Cookie {
	t.Helper()
	resp, err := http.Get(base + "/console/sign-in")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	page := string(body)
	i := strings.Index(page, `name="csrf" value="`)
	require.Positive(t, i)
	csrf := page[i+len(`name="csrf" value="`):]
	csrf = csrf[:strings.Index(csrf, `"`)]
	req, err := http.NewRequest(http.MethodPost, base+"/console/sign-in", strings.NewReader(url.Values{"csrf": {csrf}, "token": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Name == "reckon_console" {
			return c
		}
	}
	t.Fatal("no session cookie after signing in")
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scanSummary names how the plans read reckon_effects: the index scans by index, and any other
// access.
func scanSummary(plans []string) string {
	seen := map[string]bool{}
	var out []string
	for _, plan := range plans {
		for _, line := range strings.Split(plan, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "->"))
			if i := strings.Index(line, "  (cost="); i > 0 {
				line = line[:i]
			}
			if strings.Contains(line, " on reckon_effects") && !seen[line] {
				seen[line] = true
				out = append(out, line)
			}
		}
	}
	if len(out) == 0 {
		return "reckon_effects not read"
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// scalePage is a console page TestConsoleAtScale times: its name in the report and its path.
type scalePage struct{ name, path string }

// scalePages is the pages to time on pool's effects: a STUCK effect's, a tenant's, filtered by
// values found there, and a run's if there is one. The path of "effects, page 2" is left for the
// caller, from the first page's Next link.
func scalePages(t *testing.T, pool *pgxpool.Pool) []scalePage {
	t.Helper()
	ctx := context.Background()
	var stuck, tenant, connector, businessKey, run string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text, tenant_id, connector FROM reckon_effects WHERE state = 'STUCK' LIMIT 1`).
		Scan(&stuck, &tenant, &connector))
	require.NoError(t, pool.QueryRow(ctx, `SELECT business_key FROM reckon_effects WHERE tenant_id = $1 AND business_key IS NOT NULL LIMIT 1`, tenant).
		Scan(&businessKey))
	require.NoError(t, pool.QueryRow(ctx, `SELECT run_id FROM reckon_effects WHERE tenant_id = $1 AND run_id IS NOT NULL LIMIT 1`, tenant).
		Scan(&run))
	week := time.Now().Add(-7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	pages := []scalePage{
		{"overview", "/console/overview"},
		{"STUCK queue", "/console/stuck"},
		{"awaiting confirmation", "/console/awaiting"},
		{"effects", "/console/effects"},
		{"effects, page 2", ""}, // the Next link of the first page
		{"effects state=FAILED", "/console/effects?state=FAILED"},
		{"effects tenant+state=PENDING", "/console/effects?tenant=" + tenant + "&state=PENDING"},
		{"effects tenant+connector", "/console/effects?tenant=" + tenant + "&connector=" + connector},
		{"effects connector", "/console/effects?connector=" + connector},
		{"effects business_key", "/console/effects?tenant=" + tenant + "&business_key=" + url.QueryEscape(businessKey)},
		{"effects run", "/console/effects?tenant=" + tenant + "&run=" + url.QueryEscape(run)},
		{"effects created_after (7 days)", "/console/effects?created_after=" + url.QueryEscape(week)},
		{"effect detail (STUCK)", "/console/effects/" + stuck},
		{"bulk preview (STUCK → FAILED)", "/console/bulk?state=STUCK&to=FAILED"},
		{"runs", "/console/runs"},
		{"connectors", "/console/connectors"},
	}
	var runTenant, runID string // the loader's effects name runs that it does not record: a run if there is one
	if err := pool.QueryRow(ctx, `SELECT tenant_id, id FROM reckon_runs LIMIT 1`).Scan(&runTenant, &runID); err == nil {
		pages = append(pages, scalePage{"run detail", "/console/runs/" + runTenant + "/" + url.PathEscape(runID)})
	} else {
		t.Logf("no run detail page: reckon_runs is empty (%v)", err)
	}
	return pages
}

// planRecorder collects the plans auto_explain sends a connection as notices.
type planRecorder struct {
	mu    sync.Mutex
	plans []string
}

// onNotice is a pgconn.NoticeHandler that keeps the notices that are plans.
func (r *planRecorder) onNotice(_ *pgconn.PgConn, n *pgconn.Notice) {
	if strings.HasPrefix(n.Message, "duration:") {
		r.mu.Lock()
		r.plans = append(r.plans, n.Message)
		r.mu.Unlock()
	}
}

// reset forgets the plans collected so far.
func (r *planRecorder) reset() {
	r.mu.Lock()
	r.plans = nil
	r.mu.Unlock()
}

// snapshot is a copy of the plans collected since the last reset, oldest first.
func (r *planRecorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.plans)
}

// explainingPool opens a pool of one connection to the database at databaseURL whose every
// statement's plan goes to plans (auto_explain); it is closed when the test ends.
func explainingPool(t *testing.T, databaseURL string, plans *planRecorder) *pgxpool.Pool {
	t.Helper()
	config, err := pgxpool.ParseConfig(databaseURL)
	require.NoError(t, err)
	config.MaxConns = 1
	config.ConnConfig.OnNotice = plans.onNotice
	config.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET client_min_messages = log`)
		return err
	}
	explained, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(explained.Close)
	return explained
}
