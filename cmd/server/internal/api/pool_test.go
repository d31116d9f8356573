package api_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
)

// setupPool is setup with the server (and its effects client) on a pool of only conns
// connections and at most slots requests at once (0: the default); h.pool stays the test's own.
func setupPool(t *testing.T, conns int32, slots int) *harness {
	t.Helper()
	h := setup(t, 0)
	config, err := pgxpool.ParseConfig(h.pool.Config().ConnString())
	require.NoError(t, err)
	config.MaxConns = conns
	h.serveOnPool(config, slots)
	return h
}

// serveOnPool serves h's API, with an effects client like h.client, from a pool of their own made
// with config, at most slots requests at once (0: the default); h.pool stays the test's own.
func (h *harness) serveOnPool(config *pgxpool.Config, slots int) {
	h.t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(h.t, err)
	h.t.Cleanup(pool.Close)
	h.serve(&api.Config{Pool: pool, Effects: bankClient(h.t, pool, h.bank), MaxConcurrentRequests: slots})
}

// TestConcurrentRequestsSmallPool: 40 concurrent callbacks, resolves, enqueues naming an unknown
// connector (which reload the connectors) and saga-less reads against a server whose pool has 4
// connections all get their answer. Before the fix every mutation held the request's transaction
// while asking the pool for a second connection: with as many requests as connections, none ever
// got it.
func TestConcurrentRequestsSmallPool(t *testing.T) {
	h := setupPool(t, 4, 0)
	acme := h.token("acme", false)
	stuck := make([]effectBody, 10)
	for i := range stuck {
		stuck[i] = h.enqueue(acme, fmt.Sprintf("stuck-%d", i), 10+i)
		h.makeStuck(stuck[i].ID)
	}

	type result struct {
		what   string
		status int
		err    error
	}
	client := &http.Client{Timeout: 30 * time.Second}
	results := make(chan result, 40)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 40; i++ {
		var what, path, body string
		var want int
		switch i % 4 {
		case 0:
			what, path, body, want = "callback", fmt.Sprintf("/v1/callbacks/run:%d", i), `{"result":{}}`, http.StatusNotFound
		case 1:
			e := stuck[i/4]
			what, path, body, want = "resolve", "/v1/effects/"+e.ID.String()+"/resolve", `{"to":"CONFIRMED","reason":"checked the bank statement"}`, http.StatusOK
		case 2:
			what, path, body, want = "enqueue unknown connector", "/v1/effects", fmt.Sprintf(`{"connector":"nope.%d","idempotency_key":"k%d"}`, i, i), http.StatusUnprocessableEntity
		case 3:
			what, path, body, want = "enqueue", "/v1/effects", fmt.Sprintf(`{"connector":"bank.wire","idempotency_key":"new-%d","args":{"account":"a-1","amount":1}}`, i), http.StatusCreated
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, err := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(body))
			if err != nil {
				results <- result{what: what, err: err}
				return
			}
			req.Header.Set("Authorization", "Bearer "+acme)
			resp, err := client.Do(req)
			if err != nil {
				results <- result{what: what, err: err}
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				err = fmt.Errorf("want %d, got %d: %s", want, resp.StatusCode, raw)
			}
			results <- result{what: what, status: resp.StatusCode, err: err}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	for r := range results {
		require.NoError(t, r.err, r.what)
	}
	for _, e := range stuck {
		require.Equal(t, "CONFIRMED", h.state(e.ID))
	}
}

// TestMaxConcurrentRequests: with one slot, a request waits while another is being answered (here
// held on a row lock) and gets no answer before it gives up; once the slot is free it is served.
func TestMaxConcurrentRequests(t *testing.T) {
	h := setupPool(t, 4, 1)
	acme := h.token("acme", false)
	e := h.enqueue(acme, "held", 10)
	h.makeStuck(e.ID)

	ctx := context.Background()
	lock, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx) //nolint:errcheck // released below
	_, err = lock.Exec(ctx, `SELECT 1 FROM reckon_effects WHERE id = $1 FOR UPDATE`, e.ID)
	require.NoError(t, err)

	resolved := make(chan response, 1)
	go func() {
		resolved <- h.do("POST", "/v1/effects/"+e.ID.String()+"/resolve", acme, `{"to":"CONFIRMED","reason":"bank statement"}`)
	}()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting))
		return waiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the resolve holds the only slot, waiting for the row lock")

	// A read gives up while waiting for the slot: nothing answered it.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(short, http.MethodGet, h.url+"/v1/effects/"+e.ID.String(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+acme)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case r := <-resolved:
		t.Fatalf("the resolve finished while the row was locked: %d %s", r.status, r.body)
	default:
	}

	require.NoError(t, lock.Rollback(ctx))
	r := <-resolved
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = h.do("GET", "/v1/effects/"+e.ID.String(), acme, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "CONFIRMED", r.effect(t).State)
}

// A server whose Postgres goes away answers 503 database_unavailable with Retry-After — through
// connections that broke and through new ones refused — never 500, and serves again once
// Postgres is back.
func TestDatabaseGoneIs503(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	acme := h.token("acme", false)

	// The server's pool reaches Postgres through a proxy that the test can take away.
	direct := h.pool.Config().ConnConfig
	proxy := startProxy(t, net.JoinHostPort(direct.Host, strconv.Itoa(int(direct.Port))))
	config, err := pgxpool.ParseConfig(h.pool.Config().ConnString())
	require.NoError(t, err)
	config.ConnConfig.Host, config.ConnConfig.Port = proxy.host(t)
	config.ConnConfig.ConnectTimeout = 5 * time.Second
	h.serveOnPool(config, 0)

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
