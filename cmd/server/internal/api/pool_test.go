package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
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

// setupPool is setup with the server (and its effects client) on a pool of only conns
// connections and at most slots requests at once (0: the default); h.pool stays the test's own.
func setupPool(t *testing.T, conns int32, slots int) *harness {
	t.Helper()
	h := setup(t, 0)
	config, err := pgxpool.ParseConfig(h.pool.Config().ConnString())
	require.NoError(t, err)
	config.MaxConns = conns
	small, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(small.Close)
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(fakebank.ConnectorOptions{BaseURL: h.bank.URL(), StatusCheck: true}.Connector()))
	client := testkit.NewClient(t, small, &effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler)})
	h.serve(&api.Config{Pool: small, Effects: client, MaxConcurrentRequests: slots})
	return h
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
