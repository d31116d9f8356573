package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/pgtest"
	"github.com/reckonhq/reckon/internal/proctest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestDemo runs what `make run` runs — the server and reactor binaries, a demo tenant and admin
// token made with the server's CLI — and the demo against them. Every scenario ends where the demo
// says it will, one effect is STUCK, and the curl the demo prints resolves it.
func TestDemo(t *testing.T) {
	t.Parallel()
	serverBin, reactorBin := proctest.Binary(t, "server"), proctest.Binary(t, "reactor")
	env := []string{"DATABASE_URL=" + pgtest.NewDB(t).Config().ConnString()}
	res := proctest.Run(t, env, serverBin, "tenants", "create", "demo")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, serverBin, "tokens", "create", "-tenant", "demo", "-admin")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	token := strings.TrimSpace(res.Stdout)

	server := proctest.Start(t, env, serverBin, "-addr", "127.0.0.1:0")
	reactor := proctest.Start(t, env, reactorBin, "-addr", "127.0.0.1:0", "-connector-sync-interval", "200ms",
		"-fetch-poll-interval", "50ms", "-fetch-cooldown", "10ms", "-sweep-interval", "200ms")
	cfg := &config{token: token, server: "http://" + server.Addr(t), reactor: "http://" + reactor.Addr(t),
		bankAddr: "127.0.0.1:0", once: true, timeout: 90 * time.Second}
	var out bytes.Buffer
	require.NoError(t, demo(context.Background(), cfg, &out), out.String())
	text := out.String()

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

	// The printed curl resolves the STUCK effect.
	match := regexp.MustCompile(`curl -sS -X POST (\S+/resolve)`).FindStringSubmatch(text)
	require.NotNil(t, match, text)
	req, err := http.NewRequest(http.MethodPost, match[1], strings.NewReader(`{"to":"CONFIRMED","reason":"bank ledger shows the wire","actor":"test"}`))
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
