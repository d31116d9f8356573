package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestServeRefusesBadEnv: environment values the server cannot parse are refused with exit status
// 2, naming each variable, before anything is opened (they used to be replaced by defaults
// silently). So is a pool too small to serve.
func TestServeRefusesBadEnv(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	// Nothing listens there: a server that got past its configuration would exit 1.
	db := "DATABASE_URL=postgres://postgres@127.0.0.1:1/reckon?sslmode=disable&connect_timeout=2"
	bad := map[string]string{
		"RECKON_MAX_BODY_BYTES":          "1MiB",
		"RECKON_IDEMPOTENCY_TTL":         "daily",
		"RECKON_CONNECTOR_SYNC_INTERVAL": "10",
		"RECKON_DB_CONNS":                "twenty",
		"RECKON_SHUTDOWN_TIMEOUT":        "soon",
		"RECKON_CONSOLE_SECURE_COOKIES":  "maybe",
	}
	env := []string{db}
	for name, value := range bad {
		env = append(env, name+"="+value)
		res := proctest.Run(t, []string{db, name + "=" + value}, server, "-addr", "127.0.0.1:0")
		require.Equal(t, 2, res.ExitCode, "%s=%s: %s", name, value, res.Stderr)
		require.Contains(t, res.Stderr, fmt.Sprintf("%s=%q", name, value))
	}
	res := proctest.Run(t, env, server, "-addr", "127.0.0.1:0")
	require.Equal(t, 2, res.ExitCode, res.Stderr)
	for name := range bad {
		require.Contains(t, res.Stderr, name, "every bad variable is named")
	}
	res = proctest.Run(t, []string{db}, server, "-addr", "127.0.0.1:0", "-db-conns", "1")
	require.Equal(t, 2, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, "-db-conns")
}

// TestServerSIGTERMUnderLoad: a server on a pool of 4 connections answers 40 concurrent callbacks
// (they used to deadlock the pool: each held the request's transaction and waited for a second
// connection), and SIGTERM with those in flight and clients that never finish their request
// bodies exits 0 within -shutdown-timeout: the hung requests are cancelled when it expires.
func TestServerSIGTERMUnderLoad(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	_, err := tenants.Create(ctx, pool, "acme", "")
	require.NoError(t, err)
	token, _, err := tenants.CreateToken(ctx, pool, "acme", &tenants.TokenOpts{Name: "ops"})
	require.NoError(t, err)
	const drain = 4 * time.Second
	srv := proctest.Start(t, []string{"DATABASE_URL=" + pool.Config().ConnString()}, server,
		"-addr", "127.0.0.1:0", "-db-conns", "4", "-shutdown-timeout", drain.String())
	addr := srv.Addr(t)
	base := "http://" + addr

	callbacks := func(n int) []error {
		errs := make([]error, n)
		client := &http.Client{Timeout: 30 * time.Second}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/callbacks/run:%d", base, i), strings.NewReader(`{"result":{}}`))
				if err != nil {
					errs[i] = err
					return
				}
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					errs[i] = fmt.Errorf("want 404, got %d: %s", resp.StatusCode, raw)
				}
			}()
		}
		wg.Wait()
		return errs
	}
	for i, err := range callbacks(40) {
		require.NoError(t, err, "callback %d", i)
	}

	// Clients that send their headers and part of the body, then nothing.
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		_, err = fmt.Fprintf(conn, "POST /v1/callbacks/run:x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"result\":", addr, token)
		require.NoError(t, err)
	}
	// A request answered on a connection dialled after theirs proves the server accepted them (it
	// accepts in order): a SIGTERM before that would find them still in the listener's backlog,
	// and nothing to drain.
	probe, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	body := `{"result":{}}`
	_, err = fmt.Fprintf(probe, "POST /v1/callbacks/run:probe HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", addr, token, len(body), body)
	require.NoError(t, err)
	status, err := bufio.NewReader(probe).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, status, "404")
	probe.Close()
	// More callbacks in flight as SIGTERM arrives: each is answered or refused, none hangs.
	done := make(chan []error, 1)
	go func() { done <- callbacks(40) }()
	start := time.Now()
	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, drain+5*time.Second), srv.Stderr())
	require.Less(t, time.Since(start), drain+time.Second, "exits within -shutdown-timeout")
	require.True(t, srv.Logged("shutdown: cancelling the requests still running"), srv.Stderr())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("callbacks in flight at SIGTERM never ended")
	}
}
