package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// receiver is a webhook receiver on 127.0.0.1: it checks each delivery's signature and keeps the
// ones it acknowledged (2xx), in the order it acknowledged them. While status is not 200 it answers
// that status and keeps nothing.
type receiver struct {
	t      *testing.T
	secret string
	server *httptest.Server

	mu        sync.Mutex
	status    int
	attempts  int
	delivered []events.Delivery
}

func newReceiver(t *testing.T, secret string, status int) *receiver {
	r := &receiver{t: t, secret: secret, status: status}
	r.server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.server.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if r.status != http.StatusOK {
		w.WriteHeader(r.status)
		return
	}
	sig := req.Header.Get(events.HeaderSignature)
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	var unix int64
	_, _ = fmt.Sscan(ts, &unix)
	if req.Header.Get("Content-Type") != "application/json" || sig != events.Sign(r.secret, time.Unix(unix, 0), body) {
		r.t.Errorf("delivery %s: bad content type or signature %q", req.Header.Get(events.HeaderDeliveryID), sig)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var d events.Delivery
	if err := json.Unmarshal(body, &d); err != nil || d.DeliveryID != req.Header.Get(events.HeaderDeliveryID) {
		r.t.Errorf("delivery body %s: %v", body, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, prev := range r.delivered {
		if prev.DeliveryID == d.DeliveryID {
			w.WriteHeader(http.StatusOK) // a legal retry of an acknowledged delivery: handled once
			return
		}
	}
	r.delivered = append(r.delivered, d)
	w.WriteHeader(http.StatusOK)
}

func (r *receiver) setStatus(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// ids returns the ids of the events acknowledged, in the order received, and fails the test if one
// came twice.
func (r *receiver) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var ids []string
	for _, d := range r.delivered {
		for _, ev := range d.Events {
			id := ev.ID.String()
			if seen[id] {
				r.t.Errorf("event %s delivered twice (delivery %s)", id, d.DeliveryID)
			}
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

type webhookFixture struct {
	t      *testing.T
	pool   *pgxpool.Pool
	client *effects.Client
	subs   *events.Subscriptions
}

// setupWebhooks starts reactors (in process, each with its own effects client) with the webhooks
// plugin configured by config.
func setupWebhooks(t *testing.T, reactors int, config *events.WebhookConfig) *webhookFixture {
	t.Helper()
	pool := pgtest.NewDB(t)
	f := &webhookFixture{t: t, pool: pool, subs: events.NewSubscriptions(pool)}
	for range reactors {
		registry := effects.NewRegistry()
		registry.MustRegister(effects.Connector{
			Name: "mail.send", Tags: []effects.Tag{effects.TagIdempotent}, Backoff: testkit.FastBackoff,
			Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
		})
		webhooks, err := events.NewWebhooks(pool, config)
		require.NoError(t, err)
		cfg := testkit.FastConfig(registry)
		cfg.Plugins = []effects.Plugin{webhooks}
		client := testkit.NewClient(t, pool, cfg)
		testkit.Start(t, client)
		if f.client == nil {
			f.client = client
		}
	}
	return f
}

func (f *webhookFixture) subscribe(tenant string, patterns []string, r *receiver) *events.Subscription {
	f.t.Helper()
	sub, err := f.subs.Create(context.Background(), events.NewSubscription{
		Tenant: tenant, URL: r.server.URL + "/hook", Patterns: patterns, Secret: r.secret, CreatedBy: "test",
	})
	require.NoError(f.t, err)
	return sub
}

// emit writes one event as the triggers do.
func (f *webhookFixture) emit(typ, tenant, session string) {
	f.t.Helper()
	_, err := f.pool.Exec(context.Background(), `SELECT reckon_emit($1, $2, nullif($3, ''), NULL, NULL, NULL, NULL, '{}'::jsonb)`, typ, tenant, session)
	require.NoError(f.t, err)
}

// expected returns the ids of the events sub must deliver as the log holds them now: after its
// start position, matching its patterns and tenant, but for the deliveries' own events.
func (f *webhookFixture) expected(sub *events.Subscription) []string {
	f.t.Helper()
	rows, err := f.pool.Query(context.Background(), `
		SELECT xid::text || '-' || seq, type FROM reckon_event_log
		WHERE (xid, seq) > ($1::bigint::text::xid8, $2::bigint) AND ($3 = '' OR tenant_id = $3)
		  AND coalesce(payload->>'connector', '') <> 'reckon.webhook'
		ORDER BY xid, seq`, int64(sub.Position.XID), sub.Position.Seq, sub.Tenant)
	require.NoError(f.t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id, typ string
		require.NoError(f.t, rows.Scan(&id, &typ))
		match := len(sub.Patterns) == 0
		for _, p := range sub.Patterns {
			match = match || events.Match(p, typ)
		}
		if match {
			ids = append(ids, id)
		}
	}
	require.NoError(f.t, rows.Err())
	return ids
}

// waitDelivered waits until r has acknowledged every event sub must deliver, then checks that it
// got exactly those, in log order, each once.
func (f *webhookFixture) waitDelivered(sub *events.Subscription, r *receiver, within time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		want, got := f.expected(sub), r.ids()
		if len(got) >= len(want) || time.Now().After(deadline) {
			require.Equal(f.t, want, got, "subscription %s (tenant %q, patterns %v)", sub.ID, sub.Tenant, sub.Patterns)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A receiver that answers 503 for a minute while sessions of two tenants write events gets every
// matching event afterwards, once, in log order (so in order per session), from two reactors that
// both run a deliverer; a tenant's subscription
// sees only its tenant's events, a pattern only its types, and no subscription sees the events of
// the deliveries themselves.
func TestWebhookReceiverDownForAMinute(t *testing.T) {
	t.Parallel()
	f := setupWebhooks(t, 2, &events.WebhookConfig{
		BatchSize: 7, MaxAttempts: 100,
		Backoff: func(attempt int) time.Duration { return min(250*time.Millisecond<<min(attempt, 10), 5*time.Second) },
	})
	down := newReceiver(t, "down-receiver-secret", http.StatusServiceUnavailable)
	acme := newReceiver(t, "acme-receiver-secret", http.StatusOK)
	tools := newReceiver(t, "tools-receiver-secret", http.StatusOK)
	subDown := f.subscribe("", []string{"turn.*", "session.created"}, down)
	subAcme := f.subscribe("acme", nil, acme)
	subTools := f.subscribe("", []string{"tool.*"}, tools)

	// Four sessions of two tenants, each writing its events in order, concurrently, for a minute;
	// acme's effects add tool.* events (and their deliveries effect.* and tool.* ones, skipped).
	const downFor = 60 * time.Second
	start := time.Now()
	var wg sync.WaitGroup
	for i, session := range []string{"acme:a:u1:chat", "acme:a:u2:chat", "globex:a:u1:chat", "globex:b:u3:sms"} {
		wg.Go(func() {
			tenant, _, _ := strings.Cut(session, ":")
			types := []string{"session.created", "turn.started", "saga.started", "turn.completed"}
			for n := 0; time.Since(start) < downFor-5*time.Second; n++ {
				f.emit(types[n%len(types)], tenant, session)
				if i == 0 && n%3 == 0 {
					_, err := f.client.Enqueue(context.Background(), effects.Spec{
						TenantID: "acme", Connector: "mail.send", IdempotencyKey: fmt.Sprintf("mail-%d", n),
					}, nil)
					require.NoError(t, err)
				}
				time.Sleep(400 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	require.Empty(t, down.ids(), "the receiver that is down acknowledged nothing")
	time.Sleep(time.Until(start.Add(downFor)))
	down.setStatus(http.StatusOK)
	t.Logf("receiver up after %v; %d attempts refused", time.Since(start).Round(time.Second), down.attempts)

	f.waitDelivered(subAcme, acme, 30*time.Second)
	f.waitDelivered(subTools, tools, 30*time.Second)
	f.waitDelivered(subDown, down, 60*time.Second)
	require.NotEmpty(t, tools.ids())
	t.Logf("delivered %d, %d and %d events after %v", len(down.ids()), len(acme.ids()), len(tools.ids()), time.Since(start).Round(time.Second))

	for _, sub := range []*events.Subscription{subDown, subAcme, subTools} {
		got, err := f.subs.Get(context.Background(), "", sub.ID)
		require.NoError(t, err)
		require.Equal(t, events.SubscriptionActive, got.State)
	}
	// The acme subscription is not another tenant's to see.
	_, err := f.subs.Get(context.Background(), "globex", subAcme.ID)
	require.ErrorIs(t, err, events.ErrSubscriptionNotFound)
}

// A delivery whose attempts run out ends FAILED: its subscription is paused, saying so, and a
// resume delivers that batch again, then what was written meanwhile, in order.
func TestWebhookFailedDeliveryPausesAndResumeRedelivers(t *testing.T) {
	t.Parallel()
	f := setupWebhooks(t, 1, &events.WebhookConfig{
		Interval: 100 * time.Millisecond, MaxAttempts: 2, Backoff: func(int) time.Duration { return 50 * time.Millisecond },
	})
	r := newReceiver(t, "failing-receiver-secret", http.StatusInternalServerError)
	sub := f.subscribe("", []string{"turn.completed"}, r)
	for range 3 {
		f.emit("turn.completed", "acme", "acme:a:u1:chat")
	}

	var paused *events.Subscription
	require.Eventually(t, func() bool {
		got, err := f.subs.Get(context.Background(), "", sub.ID)
		require.NoError(t, err)
		paused = got
		return got.State == events.SubscriptionPaused
	}, 30*time.Second, 50*time.Millisecond)
	require.Contains(t, paused.PausedReason, "ended FAILED")
	require.Equal(t, sub.Position, paused.Position, "the position went back before the failed batch")
	require.Nil(t, paused.Delivery)

	f.emit("turn.completed", "globex", "globex:a:u1:chat") // written while paused
	time.Sleep(500 * time.Millisecond)
	require.Empty(t, r.ids())

	r.setStatus(http.StatusOK)
	resumed, err := f.subs.Resume(context.Background(), "", sub.ID)
	require.NoError(t, err)
	require.Equal(t, events.SubscriptionActive, resumed.State)
	f.waitDelivered(sub, r, 20*time.Second)
	require.Len(t, r.ids(), 4)
}

// Bad input names its field.
func TestWebhookSubscriptionValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    events.NewSubscription
		field string
	}{
		{events.NewSubscription{URL: "", CreatedBy: "x"}, "url"},
		{events.NewSubscription{URL: "ftp://example.com/", CreatedBy: "x"}, "url"},
		{events.NewSubscription{URL: "http:/example.com", CreatedBy: "x"}, "url"},
		{events.NewSubscription{URL: "https://example.com/" + strings.Repeat("a", events.MaxURLBytes), CreatedBy: "x"}, "url"},
		{events.NewSubscription{URL: "https://example.com/\x00", CreatedBy: "x"}, "url"},
		{events.NewSubscription{URL: "https://example.com/\xff", CreatedBy: "x"}, "url"},
		{events.NewSubscription{URL: "https://example.com/", CreatedBy: "x", Patterns: []string{"Turn"}}, "patterns"},
		{events.NewSubscription{URL: "https://example.com/", CreatedBy: "x", Secret: "short"}, "secret"},
		{events.NewSubscription{URL: "https://example.com/", CreatedBy: "x", Tenant: "a\x00"}, "tenant"},
		{events.NewSubscription{URL: "https://example.com/"}, "created_by"},
	} {
		err := tc.in.Validate()
		var se *events.SubscriptionError
		require.ErrorAs(t, err, &se, "%+v", tc.in)
		require.Equal(t, tc.field, se.Field, "%+v", tc.in)
	}
	require.NoError(t, (&events.NewSubscription{URL: "http://127.0.0.1:8080/hook", CreatedBy: "x", Patterns: []string{"*", "turn.*", "tool.executed"}}).Validate())
}

// The default retry settings ride out an upstream that is down for several minutes.
func TestWebhookDefaultBackoffRidesOutMinutes(t *testing.T) {
	t.Parallel()
	cfg := events.WebhookConfig{}
	total := time.Duration(0)
	w, err := events.NewWebhooks(nil, &cfg)
	require.NoError(t, err)
	for attempt := 1; attempt < events.WebhookMaxAttempts(w); attempt++ {
		total += events.WebhookBackoff(w)(attempt)
	}
	require.Greater(t, total, 10*time.Minute)
}
