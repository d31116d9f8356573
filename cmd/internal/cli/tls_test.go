package cli_test

import (
	"context"
	"crypto/tls"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// ServeOn with TLS serves HTTPS with the certificate, TLS 1.2 at least: a client that trusts it
// gets its answer (and the handler sees the request's TLS state), a client limited to TLS 1.1 is
// refused at the handshake, and a plain HTTP request is answered 400. It still drains and stops
// when its context ends.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := proctest.SelfSignedCert(t)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cli.ServeOn(ctx, slog.New(slog.DiscardHandler), "test", listener, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil {
				http.Error(w, "no TLS", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, r.Proto)
		}), &cli.ServeOpts{Drain: time.Second, Timeouts: short, TLS: cli.TLSFiles{Cert: certFile, Key: keyFile}})
	}()
	addr := listener.Addr().String()

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true,
	}}
	resp, err := client.Get("https://" + addr + "/")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "HTTP/2.0", string(body), "HTTP/2 is offered")
	require.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))

	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11},
	}}
	_, err = old.Get("https://" + addr + "/")
	require.ErrorContains(t, err, "protocol version", "TLS 1.1 is refused")

	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the HTTPS port")

	cancel()
	require.NoError(t, <-done)
}

// ServeOn refuses TLS files it cannot use before serving, naming them, and closes the listener: a
// missing file, one that is not PEM, a key of another certificate, a certificate without its key.
func TestServeTLSBadFiles(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := proctest.SelfSignedCert(t)
	_, otherKey, _ := proctest.SelfSignedCert(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("not a certificate"), 0o600))
	missing := filepath.Join(t.TempDir(), "missing.pem")

	for _, tc := range []struct {
		files cli.TLSFiles
		want  []string
	}{
		{cli.TLSFiles{Cert: missing, Key: keyFile}, []string{"test: -tls-cert " + missing, "no such file"}},
		{cli.TLSFiles{Cert: certFile, Key: missing}, []string{"-tls-key " + missing, "no such file"}},
		{cli.TLSFiles{Cert: garbage, Key: keyFile}, []string{"-tls-cert " + garbage, "PEM"}},
		{cli.TLSFiles{Cert: certFile, Key: otherKey}, []string{"-tls-key " + otherKey, "does not match"}},
		{cli.TLSFiles{Cert: certFile}, []string{"-tls-cert needs -tls-key"}},
		{cli.TLSFiles{Key: keyFile}, []string{"-tls-key needs -tls-cert"}},
	} {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		err = cli.ServeOn(context.Background(), slog.New(slog.DiscardHandler), "test", listener, http.NotFoundHandler(), &cli.ServeOpts{TLS: tc.files})
		for _, want := range tc.want {
			require.ErrorContains(t, err, want, "%+v", tc.files)
		}
		_, err = listener.Accept()
		require.ErrorIs(t, err, net.ErrClosed, "the listener is closed")
	}

	config, err := cli.TLSFiles{}.Config()
	require.NoError(t, err)
	require.Nil(t, config, "no files: plain HTTP")
	config, err = cli.TLSFiles{Cert: certFile, Key: keyFile}.Config()
	require.NoError(t, err)
	require.Len(t, config.Certificates, 1)
	require.Equal(t, uint16(tls.VersionTLS12), config.MinVersion)
}

// Flags: -tls-cert and -tls-key default to RECKON_TLS_CERT and RECKON_TLS_KEY, which the command
// line overrides; BoolVar reads its variable as strconv.ParseBool does and names one it cannot.
// (Not parallel: it sets the environment.)
func TestTLSFilesFlags(t *testing.T) {
	t.Setenv("RECKON_TLS_CERT", "/etc/reckon/cert.pem")
	t.Setenv("RECKON_TLS_KEY", "/etc/reckon/key.pem")
	t.Setenv("RECKON_TEST_SECURE", "true")
	t.Setenv("RECKON_TEST_BROKEN", "yes please")
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	env := cli.EnvFlags{FlagSet: fs}
	var files cli.TLSFiles
	files.Flags(&env)
	var secure, broken bool
	env.BoolVar(&secure, "secure", "RECKON_TEST_SECURE", false, "secure")
	env.BoolVar(&broken, "broken", "RECKON_TEST_BROKEN", false, "broken")
	require.NoError(t, fs.Parse([]string{"-tls-key", "/run/key.pem"}))
	require.Equal(t, cli.TLSFiles{Cert: "/etc/reckon/cert.pem", Key: "/run/key.pem"}, files)
	require.True(t, secure)
	require.False(t, broken)
	require.EqualError(t, env.Err(), `RECKON_TEST_BROKEN="yes please": not true or false`)
	require.Contains(t, fs.Lookup("tls-cert").Usage, "(env RECKON_TLS_CERT)")
	require.Contains(t, fs.Lookup("tls-key").Usage, "(env RECKON_TLS_KEY)")
}
