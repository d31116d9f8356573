package api_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// A server whose Postgres goes away answers 503 database_unavailable with Retry-After — through
// connections that broke and through new ones refused — never 500, and serves again once
// Postgres is back.
func TestDatabaseGoneIs503(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme := h.token("acme", false)
	ctx := context.Background()

	// The server's pool reaches Postgres through a proxy that the test can take away.
	direct := h.pool.Config().ConnConfig
	proxy := startProxy(t, net.JoinHostPort(direct.Host, strconv.Itoa(int(direct.Port))))
	config, err := pgxpool.ParseConfig(h.pool.Config().ConnString())
	require.NoError(t, err)
	config.ConnConfig.Host, config.ConnConfig.Port = proxy.host(t)
	config.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(fakebank.ConnectorOptions{BaseURL: h.bank.URL(), StatusCheck: true}.Connector()))
	client := testkit.NewClient(t, pool, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	h.serve(&api.Config{Pool: pool, Effects: client})

	effect := h.enqueue(acme, "before-the-outage", 10)
	require.Equal(t, http.StatusOK, h.do("GET", "/v1/effects", acme, "").status)

	proxy.stop() // Postgres goes away: open connections break, new ones are refused
	enqueue := `{"connector":"bank.wire","idempotency_key":"during-the-outage","args":{"account":"a-1","amount":1}}`
	for round := range 3 { // broken pooled connections first, refused new ones after
		for _, r := range []response{
			h.do("GET", "/v1/effects", acme, ""),
			h.do("GET", "/v1/effects/"+effect.ID.String(), acme, ""),
			h.do("POST", "/v1/effects", acme, enqueue),
		} {
			require.Equal(t, http.StatusServiceUnavailable, r.status, "round %d: %s", round, r.body)
			require.Equal(t, "database_unavailable", r.errorCode(t))
			require.Equal(t, "2", r.header.Get("Retry-After"))
		}
	}

	proxy.restart(t) // Postgres is back on the same address
	require.Eventually(t, func() bool {
		return h.do("GET", "/v1/effects", acme, "").status == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond)
	h.enqueue(acme, "during-the-outage", 1)
}

// tcpProxy forwards connections from a port of 127.0.0.1 to target. stop closes the port and
// every connection through it, as a Postgres that goes away would; restart opens the same port
// again.
type tcpProxy struct {
	target string
	mu     sync.Mutex
	addr   string
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.restart(t)
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) host(t *testing.T) (string, uint16) {
	t.Helper()
	host, port, err := net.SplitHostPort(p.addr)
	require.NoError(t, err)
	n, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	return host, uint16(n)
}

func (p *tcpProxy) restart(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return // stopped
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = down.Close()
				continue
			}
			if !p.track(down, up) {
				return
			}
			go p.pipe(down, up)
			go p.pipe(up, down)
		}
	}()
}

// track registers the connections of one client, unless the proxy has stopped meanwhile.
func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}
