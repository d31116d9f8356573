package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestTimeoutFlagsOutOfRange: a timeout flag that is zero, negative, over an hour or not a
// duration, in a flag or in the environment, exits 2 naming it, before the database is opened.
func TestTimeoutFlagsOutOfRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-read-timeout", "-1s"}, "-read-timeout -1s: want 1ms to 1h0m0s"},
		{[]string{"-idle-timeout", "0"}, "-idle-timeout 0s: want 1ms to 1h0m0s"},
		{[]string{"-write-timeout", "2h"}, "-write-timeout 2h0m0s: want 1ms to 1h0m0s"},
		{[]string{"-read-header-timeout", "1ns"}, "-read-header-timeout 1ns: want 1ms to 1h0m0s"},
		{[]string{"-read-timeout", "soon"}, `invalid value "soon" for flag -read-timeout`},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"-database-url", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}, tc.args...)
		code := run(context.Background(), args, &stdout, &stderr)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, "%v", tc.args)
		require.NotContains(t, stderr.String(), "database", "%v: refused before the database is opened", tc.args)
	}

	server := proctest.Binary(t, "server")
	res := proctest.Run(t, []string{"RECKON_IDLE_TIMEOUT=forever"}, server)
	require.Equal(t, 2, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, `RECKON_IDLE_TIMEOUT="forever": not a duration`)
}

// TestServerTimeouts: the server binary applies its timeout flags. A client that sends a request's
// headers and then trickles its body is cut off about -read-timeout after it began (the body would
// take 5 s); a keep-alive connection left idle is closed after -idle-timeout; requests in time are
// answered.
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	url := pgtest.NewEmptyDB(t).Config().ConnString()
	env := []string{"DATABASE_URL=" + url}
	res := proctest.Run(t, env, server, "migrate", "up")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	token := tenantToken(t, env, server, "acme")
	const timeout = 300 * time.Millisecond
	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0",
		"-read-header-timeout", timeout.String(), "-read-timeout", timeout.String(), "-idle-timeout", timeout.String())
	addr := srv.Addr(t)

	// A trickled body: the request is authenticated, then its body's read times out.
	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	start := time.Now()
	_, err = fmt.Fprintf(slow, "POST /v1/effects HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr, token)
	require.NoError(t, err)
	go func() {
		for range 99 {
			time.Sleep(50 * time.Millisecond)
			if _, err := slow.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	closedAfter := awaitServerClose(t, slow, start)
	require.GreaterOrEqual(t, closedAfter, timeout)
	require.Less(t, closedAfter, 3*time.Second, "cut off about -read-timeout after the request began")

	// An idle keep-alive connection, after a request answered in time.
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	require.NoError(t, err)
	reader := bufio.NewReader(idle)
	resp, err := http.ReadResponse(reader, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "kept alive")
	idleSince := time.Now()
	closedAfter = awaitServerClose(t, readerConn{reader, idle}, idleSince)
	// The server's idle clock starts when it has written the answer, a little before idleSince
	// (taken after the client read it): the lower bound allows for that.
	require.GreaterOrEqual(t, closedAfter, timeout-100*time.Millisecond, "not closed at once: kept idle until -idle-timeout")
	require.Less(t, closedAfter, 3*time.Second, "closed about -idle-timeout after its last answer")
}

// readerConn reads through a bufio.Reader that buffers conn.
type readerConn struct {
	*bufio.Reader
	net.Conn
}

func (c readerConn) Read(p []byte) (int, error) { return c.Reader.Read(p) }

// awaitServerClose reads conn until the server closes it (EOF, or a reset when the client was
// still writing) and returns how long after since that was; it fails the test if the server keeps
// the connection open for 5 s.
func awaitServerClose(t *testing.T, conn net.Conn, since time.Time) time.Duration {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := io.Copy(io.Discard, conn)
	closedAfter := time.Since(since)
	var netErr net.Error
	require.False(t, errors.As(err, &netErr) && netErr.Timeout(), "the server kept the connection open for 5 s")
	return closedAfter
}
