package cli_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/internal/cli"
)

// short are the timeouts of these tests: short enough to keep them fast, long enough for a loaded
// machine to send a request in time.
var short = cli.Timeouts{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond, Write: 5 * time.Second, Idle: 300 * time.Millisecond}

// serve runs cli.ServeOn with handler and timeouts on 127.0.0.1 until the test ends, and returns
// its address.
func serve(t *testing.T, handler http.Handler, timeouts cli.Timeouts) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cli.ServeOn(ctx, slog.New(slog.DiscardHandler), "test", listener, handler, &cli.ServeOpts{Drain: time.Second, Timeouts: timeouts})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return listener.Addr().String()
}

// dial opens a connection to addr that the test closes.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// awaitClose reads conn until the server closes it (EOF, or a reset when the client was still
// writing) and returns what it read and when it was closed; it fails the test if the server keeps
// the connection open for 5 s.
func awaitClose(t *testing.T, conn net.Conn) (string, time.Time) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	var read strings.Builder
	_, err := io.Copy(&read, conn)
	closedAt := time.Now()
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("the server kept the connection open for 5 s; read %q", read.String())
	}
	return read.String(), closedAt
}

// A client that sends its headers, then its body slower than the read timeout: the handler's read
// fails with a timeout once the read timeout has passed since the request began, and the server
// closes the connection then, instead of waiting for the whole body.
func TestServeClosesSlowBody(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 1)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		_, _ = io.WriteString(w, "read it all")
	}), short)

	conn := dial(t, addr)
	start := time.Now()
	_, err := fmt.Fprintf(conn, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n", addr)
	require.NoError(t, err)
	go func() { // one byte every 50 ms: the 100 bytes would take 5 s
		for range 100 {
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	_, closedAt := awaitClose(t, conn)
	var netErr net.Error
	err = <-readErr
	require.True(t, errors.As(err, &netErr) && netErr.Timeout(), "the body's read timed out: %v", err)
	// start is taken just after the server began its read, so the close may come a little before
	// start + the timeout (299.3 ms of 300 in one CI run).
	require.GreaterOrEqual(t, closedAt.Sub(start), short.Read-10*time.Millisecond, "not before the read timeout")
	require.Less(t, closedAt.Sub(start), 3*time.Second, "closed about the read timeout after the request began, not after the body")
}

// A connection that sends nothing is closed after the header timeout.
func TestServeClosesSilentConnection(t *testing.T) {
	t.Parallel()
	addr := serve(t, http.NotFoundHandler(), short)
	start := time.Now() // before the dial: the server's deadline starts at its accept, after it
	conn := dial(t, addr)
	_, closedAt := awaitClose(t, conn)
	require.GreaterOrEqual(t, closedAt.Sub(start), short.ReadHeader)
	require.Less(t, closedAt.Sub(start), 3*time.Second)
}

// A keep-alive connection that sends no next request is closed after the idle timeout; one that
// does, in time, is served again.
func TestServeClosesIdleConnection(t *testing.T) {
	t.Parallel()
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }), short)
	conn := dial(t, addr)
	reader := bufio.NewReader(conn)
	get := func() {
		t.Helper()
		_, err := fmt.Fprintf(conn, "GET /ping HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		require.NoError(t, err)
		resp, err := http.ReadResponse(reader, nil)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok", string(body))
		require.False(t, resp.Close, "kept alive")
	}
	get()
	time.Sleep(short.Idle / 3)
	// Before the request: the server's idle time starts once it has written the response, which
	// is before this side has read it.
	idleSince := time.Now()
	get() // the same connection, idle for less than the timeout

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := reader.ReadByte()
	closedAt := time.Now()
	require.ErrorIs(t, err, io.EOF, "the server closed the idle connection")
	require.GreaterOrEqual(t, closedAt.Sub(idleSince), short.Idle)
	require.Less(t, closedAt.Sub(idleSince), 3*time.Second)
}

// Normal requests work under the timeouts, and a handler that runs longer than the read timeout
// (once it has read the body) still answers: the read timeout bounds reading the request, not
// answering it.
func TestServeAnswersWithinTimeouts(t *testing.T) {
	t.Parallel()
	cancelled := make(chan bool, 2)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.URL.Query().Get("slow") != "" {
			time.Sleep(2 * short.Read)
		}
		cancelled <- r.Context().Err() != nil
		_, _ = fmt.Fprintf(w, "%d bytes", len(body))
	}), short)

	client := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/", "/?slow=1"} {
		resp, err := client.Post("http://"+addr+path, "text/plain", strings.NewReader(strings.Repeat("x", 10_000)))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, "10000 bytes", string(body), path)
		require.False(t, <-cancelled, "%s: the request's context was not cancelled", path)
	}
}

// Timeouts out of range are refused, naming their flags; ServeOn refuses them before serving and
// closes the listener. Unset fields take their defaults.
func TestTimeoutsValidate(t *testing.T) {
	t.Parallel()
	valid := cli.Timeouts{ReadHeader: time.Second, Read: time.Second, Write: time.Second, Idle: time.Second}
	require.NoError(t, valid.Validate())
	for _, tc := range []struct {
		change func(*cli.Timeouts)
		want   string
	}{
		{func(t *cli.Timeouts) { t.Read = -time.Second }, "-read-timeout -1s: want 1ms to 1h0m0s"},
		{func(t *cli.Timeouts) { t.Write = 0 }, "-write-timeout 0s: want 1ms to 1h0m0s"},
		{func(t *cli.Timeouts) { t.Idle = 2 * time.Hour }, "-idle-timeout 2h0m0s: want 1ms to 1h0m0s"},
		{func(t *cli.Timeouts) { t.ReadHeader = time.Microsecond }, "-read-header-timeout 1µs"},
	} {
		timeouts := valid
		tc.change(&timeouts)
		require.ErrorContains(t, timeouts.Validate(), tc.want)
	}

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	err = cli.ServeOn(context.Background(), slog.New(slog.DiscardHandler), "test", listener, http.NotFoundHandler(),
		&cli.ServeOpts{Timeouts: cli.Timeouts{Idle: -time.Second}})
	require.ErrorContains(t, err, "test: -idle-timeout -1s")
	_, err = listener.Accept()
	require.ErrorIs(t, err, net.ErrClosed, "the listener is closed")

	// Defaults: an unset field, or no options at all, serves.
	for _, opts := range []*cli.ServeOpts{nil, {Timeouts: cli.Timeouts{Read: time.Second, ReadHeader: time.Second}}} {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- cli.ServeOn(ctx, slog.New(slog.DiscardHandler), "test", listener, http.NotFoundHandler(), opts)
		}()
		resp, err := http.Get("http://" + listener.Addr().String())
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		cancel()
		require.NoError(t, <-done)
	}
}

// Flags: the four flags with their defaults, parsed from the command line.
func TestTimeoutsFlags(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	env := cli.EnvFlags{FlagSet: fs}
	var timeouts cli.Timeouts
	timeouts.Flags(&env)
	require.NoError(t, fs.Parse([]string{"-read-timeout", "2s", "-idle-timeout", "90s"}))
	require.NoError(t, env.Err())
	require.Equal(t, cli.Timeouts{ReadHeader: 5 * time.Second, Read: 2 * time.Second, Write: time.Minute, Idle: 90 * time.Second}, timeouts)
	require.NoError(t, timeouts.Validate())
	for _, name := range []string{"read-header-timeout", "read-timeout", "write-timeout", "idle-timeout"} {
		require.NotNil(t, fs.Lookup(name), name)
		require.Contains(t, fs.Lookup(name).Usage, "(env RECKON_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+")")
	}
	require.Error(t, fs.Parse([]string{"-write-timeout", "soon"}), "not a duration")
}
