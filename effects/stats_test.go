package effects_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// statsInterval is the shared statistics' interval in these tests.
const statsInterval = 300 * time.Millisecond

// statsComputer starts a reactor of another queue on h's database that computes the shared
// statistics every statsInterval and works none of h's jobs, and returns its metrics.
func (h *harness) statsComputer(id string) (*effects.Client, *prometheus.Registry) {
	h.t.Helper()
	metrics := prometheus.NewRegistry()
	client := testkit.NewClient(h.t, h.pool, &effects.Config{
		Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Registerer: metrics,
		ID: id, Queue: "elsewhere", StatsInterval: statsInterval,
	})
	testkit.Start(h.t, client)
	return client, metrics
}

// TestQueueLag: effects enqueued while no reactor works their queue make
// reckon_effects_oldest_pending_seconds of their connector grow, about their age, while another
// registered connector's stays at 0 and an effect accepted upstream (awaiting its callback, not
// queued) counts as PENDING but not as lag; once a reactor dispatches them the lag is 0 again.
func TestQueueLag(t *testing.T) {
	t.Parallel()
	h := setupWired(t, func(c *effects.Config) { c.StatsInterval = statsInterval })
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "mail.send", Tags: idempotentTags,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil },
	}))
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "jobs.run", Tags: idempotentTags, AsyncTimeout: time.Hour,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") },
	}))
	// An effect accepted upstream: PENDING, awaiting its callback. Inline (Do), so that it is
	// accepted without a reactor working the queue.
	accepted, err := h.client.Do(context.Background(), effects.Spec{Connector: "jobs.run", IdempotencyKey: "job-1"})
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, accepted.State)
	require.NotEmpty(t, accepted.CorrelationID)

	h.statsComputer("computer")
	enqueued := time.Now()
	queued := []*effects.Effect{h.enqueue("bank.wire", "lag-1", 10), h.enqueue("bank.wire", "lag-2", 20)}
	lag := func(connector string) float64 {
		return h.metric("reckon_effects_oldest_pending_seconds", map[string]string{"connector": connector})
	}
	require.Eventually(t, func() bool { return lag("bank.wire") >= 0.5 }, 10*time.Second, 20*time.Millisecond)
	first := lag("bank.wire")
	require.LessOrEqual(t, first, time.Since(enqueued).Seconds()+0.1, "about the age of the oldest")
	require.Eventually(t, func() bool { return lag("bank.wire") > first }, 10*time.Second, 20*time.Millisecond, "it grows")
	require.LessOrEqual(t, lag("bank.wire"), time.Since(enqueued).Seconds()+0.1)
	require.Zero(t, lag("mail.send"), "nothing of mail.send waits")
	require.Zero(t, lag("jobs.run"), "an accepted effect awaits its callback, not a reactor")
	require.Equal(t, 3.0, h.metric("reckon_effects", map[string]string{"state": "PENDING"}), "it is PENDING all the same")

	h.start()
	for _, e := range queued {
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
	}
	require.Eventually(t, func() bool { return lag("bank.wire") == 0 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1.0, h.metric("reckon_effects", map[string]string{"state": "PENDING"}))
}

// TestSharedStats: two reactors on one database compute the shared statistics once per interval
// between them — computed_at advances at least an interval at a time, and the computations both
// count add up to about one per interval — and report the same numbers (of effects of a connector
// neither has, which stay PENDING). A computation in progress (the row claimed by a transaction
// that does not end) is skipped, not waited for, and the numbers age meanwhile; when the reactor
// that computed stops, the other takes over within an interval or two.
func TestSharedStats(t *testing.T) {
	t.Parallel()
	h := setup(t)
	enqueuer := effects.NewRegistry()
	require.NoError(t, enqueuer.Register(effects.Connector{Name: "elsewhere.only", Tags: idempotentTags,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil }}))
	other := testkit.NewClient(t, h.pool, &effects.Config{Registry: enqueuer, Logger: slog.New(slog.DiscardHandler)})
	for _, key := range []string{"a", "b", "c"} {
		_, err := other.Enqueue(context.Background(), effects.Spec{Connector: "elsewhere.only", IdempotencyKey: key}, nil)
		require.NoError(t, err)
	}

	a, metricsA := h.statsComputer("reactor-a")
	b, metricsB := h.statsComputer("reactor-b")
	computations := func() float64 {
		return testkit.Metric(t, metricsA, "reckon_stats_computations_total", map[string]string{"part": "effects"}) +
			testkit.Metric(t, metricsB, "reckon_stats_computations_total", map[string]string{"part": "effects"})
	}
	start, before := time.Now(), computations()

	// Watch the row: every value of computed_at, by the database's clock.
	var stamps []time.Time
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			var at time.Time
			require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT computed_at FROM reckon_stats WHERE part = 'effects'`).Scan(&at))
			if len(stamps) == 0 || !at.Equal(stamps[len(stamps)-1]) {
				stamps = append(stamps, at)
			}
		}
	}
	watch(3 * time.Second)
	elapsed := time.Since(start)
	n := computations() - before
	require.GreaterOrEqual(t, len(stamps), 5, "computed every interval or so: %v", stamps)
	for i := 1; i < len(stamps); i++ {
		require.GreaterOrEqual(t, stamps[i].Sub(stamps[i-1]), statsInterval, "at most once per interval: %v", stamps)
	}
	require.LessOrEqual(t, n, elapsed.Seconds()/statsInterval.Seconds()+1, "one computation per interval between both")
	require.GreaterOrEqual(t, n, elapsed.Seconds()/(1.5*statsInterval.Seconds())-1, "and one each interval or so")

	// Both report the same numbers, read from the stored row.
	for _, m := range []prometheus.Gatherer{metricsA, metricsB} {
		require.Equal(t, 3.0, testkit.Metric(t, m, "reckon_effects", map[string]string{"state": "PENDING"}))
		require.Positive(t, testkit.Metric(t, m, "reckon_effects_oldest_pending_seconds", map[string]string{"connector": "elsewhere.only"}),
			"a connector of none of them, with effects waiting")
		age := testkit.Metric(t, m, "reckon_stats_age_seconds", nil)
		require.GreaterOrEqual(t, age, 0.0)
		require.Less(t, age, 2*statsInterval.Seconds())
		problems, err := testutil.GatherAndLint(m)
		require.NoError(t, err)
		require.Empty(t, problems)
	}
	require.Equal(t, testkit.Metric(t, metricsA, "reckon_effects_oldest_pending_seconds", map[string]string{"connector": "elsewhere.only"}),
		testkit.Metric(t, metricsB, "reckon_effects_oldest_pending_seconds", map[string]string{"connector": "elsewhere.only"}))

	// A computation that hangs holding the row: the others skip it, without waiting, and the
	// numbers age.
	hung, err := h.pool.Begin(context.Background())
	require.NoError(t, err)
	_, err = hung.Exec(context.Background(), `SELECT 1 FROM reckon_stats WHERE part = 'effects' FOR UPDATE`)
	require.NoError(t, err)
	held := computations()
	time.Sleep(3 * statsInterval) // nothing to wait for: this is the time the others get to try
	require.Equal(t, held, computations(), "no computation while the row is held")
	require.Greater(t, testkit.Metric(t, metricsA, "reckon_stats_age_seconds", nil), 2*statsInterval.Seconds(), "the numbers age")
	require.NoError(t, hung.Rollback(context.Background()))
	require.Eventually(t, func() bool { return computations() > held }, 5*time.Second, 10*time.Millisecond)

	// The reactor that computed last stops: the other computes from then on.
	var computedBy string
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT computed_by FROM reckon_stats WHERE part = 'effects'`).Scan(&computedBy))
	stopped, survivor, survivorMetrics := a, "reactor-b", metricsB
	if computedBy == "reactor-b" {
		stopped, survivor, survivorMetrics = b, "reactor-a", metricsA
	}
	require.NoError(t, stopped.Stop(context.Background()))
	stoppedAt, survived := time.Now(), testkit.Metric(t, survivorMetrics, "reckon_stats_computations_total", map[string]string{"part": "effects"})
	require.Eventually(t, func() bool {
		var by string
		require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT computed_by FROM reckon_stats WHERE part = 'effects'`).Scan(&by))
		return by == survivor
	}, 5*time.Second, 10*time.Millisecond)
	require.Less(t, time.Since(stoppedAt), 3*statsInterval, "within an interval or two")
	watch(3 * statsInterval)
	require.GreaterOrEqual(t, testkit.Metric(t, survivorMetrics, "reckon_stats_computations_total", map[string]string{"part": "effects"}), survived+2,
		"and goes on computing")
}

// TestSettleLatency: the settlements this process makes are observed in
// reckon_effect_settle_latency_seconds{connector,state}, each as its row's updated_at − created_at
// (enqueue to settlement on the database's clock): a dispatch confirmed and one failed (group
// commit), an owned effect confirmed in its hook's transaction, and an async effect confirmed by
// its callback, whose latency covers its wait for the callback.
func TestSettleLatency(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *effects.Config) {
		c.Plugins = []effects.Plugin{effects.OnSettle("app", func(context.Context, pgx.Tx, *effects.Effect) error { return nil })}
	})
	h.wire(fakebank.ConnectorOptions{StatusCheck: true})
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "jobs.run", Tags: idempotentTags, AsyncTimeout: time.Hour,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") },
	}))
	h.start()
	ctx := context.Background()

	confirmed := h.enqueue("bank.wire", "ok", 10)
	failed := h.enqueue("bank.wire", "refused", 0) // the bank refuses a non-positive amount: 400, permanent
	owned, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "owned", Owner: "app",
		Args: map[string]any{"account": "acct-1", "amount": 5}}, nil)
	require.NoError(t, err)
	async, err := h.client.Enqueue(ctx, effects.Spec{Connector: "jobs.run", IdempotencyKey: "job"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, h.wait(confirmed.ID).State)
	require.Equal(t, effects.StateFailed, h.wait(failed.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(owned.ID).State)
	var correlationID string
	require.Eventually(t, func() bool {
		e, err := h.client.Get(ctx, async.ID)
		require.NoError(t, err)
		correlationID = e.CorrelationID
		return correlationID != ""
	}, 10*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // the upstream takes its time: part of the latency
	_, err = h.client.Callback(ctx, correlationID, json.RawMessage(`{"done":true}`), "", nil)
	require.NoError(t, err)

	latency := func(ids ...any) float64 { // the rows' settle latencies, summed, by the database
		var sum float64
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT sum(extract(epoch FROM updated_at - created_at))::float8 FROM reckon_effects WHERE id = ANY ($1)`,
			ids).Scan(&sum))
		return sum
	}
	for _, want := range []struct {
		connector, state string
		ids              []any
	}{
		{"bank.wire", "CONFIRMED", []any{confirmed.ID, owned.ID}},
		{"bank.wire", "FAILED", []any{failed.ID}},
		{"jobs.run", "CONFIRMED", []any{async.ID}},
	} {
		labels := map[string]string{"connector": want.connector, "state": want.state}
		require.Eventually(t, func() bool {
			count, _, _ := testkit.Histogram(t, h.metrics, "reckon_effect_settle_latency_seconds", labels)
			return count == uint64(len(want.ids))
		}, 10*time.Second, 10*time.Millisecond, "%v", labels)
		_, sum, _ := testkit.Histogram(t, h.metrics, "reckon_effect_settle_latency_seconds", labels)
		require.InDelta(t, latency(want.ids...), sum, 1e-6, "%v: updated_at − created_at", labels)
	}
	_, sum, _ := testkit.Histogram(t, h.metrics, "reckon_effect_settle_latency_seconds", map[string]string{"connector": "jobs.run", "state": "CONFIRMED"})
	require.GreaterOrEqual(t, sum, 0.3, "from the enqueue, not the dispatch: the wait for the callback included")
	count, _, ok := testkit.Histogram(t, h.metrics, "reckon_effect_settle_latency_seconds", map[string]string{"connector": "jobs.run", "state": "FAILED"})
	require.True(t, ok, "pre-created")
	require.Zero(t, count)
}

// TestStatsNotComputedYet: a client that reports but does not compute (never started, or started
// with a negative StatsInterval) on a database where nothing computed the shared statistics yet
// has no gauges of them and reports their age as +Inf; StatsInterval outside 100ms..1h is refused.
func TestStatsNotComputedYet(t *testing.T) {
	t.Parallel()
	h := setupWired(t, func(c *effects.Config) { c.StatsInterval = -1 })
	h.start()
	got := testkit.Series(t, h.metrics)
	require.True(t, math.IsInf(got[`reckon_stats_age_seconds{}`], 1), "never computed: %v", got[`reckon_stats_age_seconds{}`])
	require.NotContains(t, got, `reckon_effects{state="STUCK"}`)
	require.NotContains(t, got, `reckon_effects_oldest_pending_seconds{connector="bank.wire"}`)
	require.Zero(t, got[`reckon_stats_computations_total{part="effects"}`])
	require.Equal(t, 1.0, got[`reckon_reactors_live{}`], "this one lives all the same")
	problems, err := testutil.GatherAndLint(h.metrics)
	require.NoError(t, err)
	require.Empty(t, problems)

	for _, interval := range []time.Duration{time.Millisecond, 99 * time.Millisecond, time.Hour + time.Second} {
		_, err := effects.NewClient(h.pool, &effects.Config{Registry: effects.NewRegistry(), StatsInterval: interval})
		require.ErrorContains(t, err, "Config.StatsInterval", "%v", interval)
	}
}
