package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDemo runs what `make run` runs — the server and reactor binaries, a demo tenant, its token
// and a system token made with the server's CLI — and the demo against them. Every scenario ends where the demo
// says it will, one effect is STUCK, and the curl the demo prints resolves it.
func TestDemo(t *testing.T) {
	t.Parallel()
	serverBin, reactorBin := proctest.Binary(t, "server"), proctest.Binary(t, "reactor")
	env := []string{"DATABASE_URL=" + pgtest.NewDB(t).Config().ConnString()}
	res := proctest.Run(t, env, serverBin, "tenants", "create", "demo")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, serverBin, "tokens", "create", "-tenant", "demo")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	token := strings.TrimSpace(res.Stdout)
	res = proctest.Run(t, env, serverBin, "tokens", "create", "-system", "-name", "demo connectors")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	systemToken := strings.TrimSpace(res.Stdout)

	server := proctest.Start(t, env, serverBin, "-addr", "127.0.0.1:0")
	reactor := proctest.Start(t, env, reactorBin, "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms")
	// The demo talks to the server through a proxy that counts its reads.
	serverURL, err := url.Parse("http://" + server.Addr(t))
	require.NoError(t, err)
	var lists, reads atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(serverURL)
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/effects" {
			lists.Add(1)
		} else if r.Method == http.MethodGet {
			reads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counting.Close)
	cfg := &config{token: token, systemToken: systemToken, server: counting.URL, reactor: "http://" + reactor.Addr(t),
		bankAddr: "127.0.0.1:0", once: true, timeout: 90 * time.Second}
	var out bytes.Buffer
	start := time.Now()
	require.NoError(t, demo(context.Background(), cfg, &out), out.String())
	elapsed := time.Since(start)
	text := out.String()

	// It polls about twice a second (one list call), and reads an effect's history only when the
	// effect changed: a few times per effect, not every effect every round.
	require.LessOrEqual(t, float64(lists.Load()), elapsed.Seconds()/pollInterval.Seconds()+2, "list calls in %v", elapsed)
	transitions := len(regexp.MustCompile(`(?m)^demo: \S+\s+[A-Z]+ → `).FindAllString(text, -1))
	t.Logf("%d list calls and %d effect reads in %v for %d transitions", lists.Load(), reads.Load(), elapsed, transitions)
	require.LessOrEqual(t, reads.Load(), int64(2*transitions+len(scenarios)+2), "effect reads for %d transitions", transitions)

	for _, want := range []string{
		"plain        PENDING → CONFIRMED",
		"dropped      PENDING → UNKNOWN", "dropped      UNKNOWN → CONFIRMED  (status check: present)",
		"timeout      UNKNOWN → PENDING", "timeout      PENDING → CONFIRMED",
		"busy         PENDING → CONFIRMED",
		"rejected     PENDING → FAILED",
		"double       UNKNOWN → CONFIRMED", "double/undo  PENDING → CONFIRMED",
		"mystery      UNKNOWN → STUCK",
	} {
		require.Contains(t, text, want)
	}
	require.Regexp(t, `r-1\s+demo-\w+-double/\S+\s+-75\s+reversal of demo-\w+-double`, text, "the extra wire was reversed")

	// It points at the STUCK effect's page in the console.
	require.Regexp(t, `demo: in the console, \S+/console/effects/[0-9a-f-]{36} `, text)

	// The printed curl resolves the STUCK effect.
	match := regexp.MustCompile(`curl -sS -X POST (\S+/resolve)`).FindStringSubmatch(text)
	require.NotNil(t, match, text)
	req, err := http.NewRequest(http.MethodPost, strings.Replace(match[1], counting.URL, serverURL.String(), 1), strings.NewReader(`{"to":"CONFIRMED","reason":"bank ledger shows the wire","actor":"test"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	server.Signal(t, syscall.SIGTERM)
	reactor.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, server.Wait(t, 30*time.Second))
	require.Equal(t, 0, reactor.Wait(t, 30*time.Second))
}
