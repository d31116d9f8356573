package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestHealthcheck: `server healthcheck URL` exits 0 on a 2xx answer and 1 on anything else — an
// error status (its body quoted), a redirect (not followed), no answer within -timeout, nothing
// listening — and 2 on a mistake in its arguments, all without a database.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}
	hang := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			_, _ = w.Write([]byte("ok\n"))
		case "/down":
			http.Error(w, "database: connection refused", http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, r, "/readyz", http.StatusFound)
		case "/hang":
			<-hang
		}
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { close(hang) }) // first: Close waits for the handler
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := "http://" + closed.Addr().String() + "/readyz"
	require.NoError(t, closed.Close())

	ok := proctest.Run(t, env, server, "healthcheck", upstream.URL+"/readyz")
	require.Equal(t, 0, ok.ExitCode, ok.Stderr)
	require.Empty(t, ok.Stdout+ok.Stderr)

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{upstream.URL + "/down"}, 1, "503 Service Unavailable: database: connection refused"},
		{[]string{upstream.URL + "/moved"}, 1, "302 Found"},
		{[]string{"-timeout", "200ms", upstream.URL + "/hang"}, 1, "deadline exceeded"},
		{[]string{nobody}, 1, "connection refused"},
		{[]string{"ftp://example.com/"}, 2, "want http:// or https://"},
		{[]string{"-timeout", "2h", upstream.URL}, 2, "-timeout 2h0m0s: want 1ms to 1m"},
		{[]string{upstream.URL, upstream.URL}, 2, "one URL"},
	} {
		start := time.Now()
		res := proctest.Run(t, env, server, append([]string{"healthcheck"}, c.args...)...)
		require.Equal(t, c.code, res.ExitCode, "%v: %s", c.args, res.Stderr)
		require.Contains(t, res.Stderr, c.says, "%v", c.args)
		require.Less(t, time.Since(start), 10*time.Second, "%v", c.args)
	}
}
