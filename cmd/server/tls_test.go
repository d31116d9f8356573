package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestServeTLS: the server binary serves HTTPS with -tls-cert and -tls-key (here from
// RECKON_TLS_CERT and RECKON_TLS_KEY), and the console's sign-in cookie is Secure then; over plain
// HTTP it is Secure with -console-secure-cookies (TLS ended at a proxy) and not without. Each
// server stops with exit status 0 on SIGTERM.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	certFile, keyFile, roots := proctest.SelfSignedCert(t)

	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		scheme string
		secure bool
	}{
		{"https", []string{"RECKON_TLS_CERT=" + certFile, "RECKON_TLS_KEY=" + keyFile}, nil, "https", true},
		{"behind a proxy", nil, []string{"-console-secure-cookies"}, "http", true},
		{"plain http", nil, nil, "http", false},
	} {
		srv := proctest.Start(t, append(env, tc.env...), server, append([]string{"-addr", "127.0.0.1:0"}, tc.args...)...)
		base := tc.scheme + "://" + srv.Addr(t)
		resp := getWith(t, roots, base+"/console/sign-in")
		require.Equal(t, http.StatusOK, resp.StatusCode, tc.name)
		require.Equal(t, tc.scheme == "https", resp.TLS != nil, tc.name)
		var signIn *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "reckon_console_sign_in" {
				signIn = c
			}
		}
		require.NotNil(t, signIn, "%s: %v", tc.name, resp.Header.Values("Set-Cookie"))
		require.Equal(t, tc.secure, signIn.Secure, "%s: %s", tc.name, resp.Header.Get("Set-Cookie"))
		require.Equal(t, http.StatusOK, getWith(t, roots, base+"/healthz").StatusCode, tc.name)
		srv.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
	}
}

// getWith GETs url with a client that trusts roots and returns the answer, its body closed.
func getWith(t *testing.T, roots *x509.CertPool, url string) *http.Response {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := client.Get(url)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

// TestServeTLSMistakes: half a certificate pair, or -console-secure-cookies that is not a bool, is
// exit status 2 naming it (RECKON_CONSOLE_SECURE_COOKIES: TestServeRefusesBadEnv); a certificate or key that cannot be read is exit status 1 naming the
// file, before the database is opened.
func TestServeTLSMistakes(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	// Nothing listens there: a server that got past its configuration would fail on the database.
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=2"}
	certFile, keyFile, _ := proctest.SelfSignedCert(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")

	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{nil, []string{"-tls-cert", certFile}, 2, "-tls-cert needs -tls-key"},
		{[]string{"RECKON_TLS_KEY=" + keyFile}, nil, 2, "-tls-key needs -tls-cert"},
		{nil, []string{"-console-secure-cookies=maybe"}, 2, "-console-secure-cookies"},
		{nil, []string{"-tls-cert", missing, "-tls-key", keyFile}, 1, "-tls-cert " + missing},
		{nil, []string{"-tls-cert", certFile, "-tls-key", certFile}, 1, "-tls-key " + certFile},
	} {
		res := proctest.Run(t, append(env, tc.env...), server, append([]string{"-addr", "127.0.0.1:0"}, tc.args...)...)
		require.Equal(t, tc.code, res.ExitCode, "%v %v: %s", tc.env, tc.args, res.Stderr)
		require.Contains(t, res.Stderr, tc.want, "%v %v", tc.env, tc.args)
		require.False(t, strings.Contains(res.Stderr, "database none"), "%v %v: refused before the database is opened: %s", tc.env, tc.args, res.Stderr)
	}
}
