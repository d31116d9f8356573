// Package testkit holds the helpers Reckon's own tests share: counting
// rows, reading a metric, an effects configuration that fetches and sweeps quickly, clients
// stopped when the test ends, waiting for an effect to settle, its audit path, and this test
// binary started as a child process. Scenario-specific helpers stay in each package's
// harness_test.go. Under it are the other kits: a database per test (pgtest), binaries run as
// processes (proctest), fake upstreams (fakebank, fakejobs, fakehttp), and the checks of the
// documentation and of the OpenAPI documents.
//
// It is for Reckon's tests only, and builds on the public package
// github.com/reckonhq/reckon/reckontest, which users' tests import: what both need (the fast
// timings, the audit path) is the public package's.
package testkit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	public "github.com/reckonhq/reckon/reckontest"
)

// Querier is what Count queries: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Count runs a query that returns one integer (a count(*)) and returns it; a failing query fails
// the test.
func Count(tb testing.TB, db Querier, sql string, args ...any) int {
	tb.Helper()
	var n int
	require.NoError(tb, db.QueryRow(context.Background(), sql, args...).Scan(&n), "%s", sql)
	return n
}

// Metric returns the value of the counter or gauge name with exactly these labels (0 if absent).
func Metric(tb testing.TB, gatherer prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	m := find(tb, gatherer, name, labels)
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// Histogram returns the sample count and sum of the histogram name with exactly these labels, and
// whether the series exists.
func Histogram(tb testing.TB, gatherer prometheus.Gatherer, name string, labels map[string]string) (count uint64, sum float64, ok bool) {
	tb.Helper()
	m := find(tb, gatherer, name, labels)
	if m == nil {
		return 0, 0, false
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), true
}

// Series gathers gatherer and returns every series as name{label="value",…} (labels sorted) with
// its value: a counter's or gauge's, a histogram's sample count.
func Series(tb testing.TB, gatherer prometheus.Gatherer) map[string]float64 {
	tb.Helper()
	families, err := gatherer.Gather()
	require.NoError(tb, err)
	out := map[string]float64{}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			var labels []string
			for _, pair := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", pair.GetName(), pair.GetValue()))
			}
			slices.Sort(labels)
			key := family.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			default:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// find gathers and returns the series of name with exactly these labels, nil if there is none.
func find(tb testing.TB, gatherer prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	tb.Helper()
	families, err := gatherer.Gather()
	require.NoError(tb, err)
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
	metrics:
		for _, m := range family.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, label := range m.GetLabel() {
				if labels[label.GetName()] != label.GetValue() {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// FastBackoff keeps a connector's retries quick: 20ms after every attempt.
func FastBackoff(int) time.Duration { return 20 * time.Millisecond }

// FastConfig is an effects configuration for tests on registry: the public reckontest.FastConfig
// timings (quick fetching: 5ms cooldown, 50ms poll; a sweeper every 100ms; a 2s margin before an
// attempt is presumed dead), 20 workers and a logger that discards. Tests change what their
// scenario needs before building the client.
func FastConfig(registry *effects.Registry) *effects.Config {
	return public.FastConfig(&effects.Config{Registry: registry, Logger: slog.New(slog.DiscardHandler), Workers: 20})
}

// NewClient builds an effects client on pool with config (not started) and stops it when the test
// ends (a client that was never started still holds Wait's listener).
func NewClient(tb testing.TB, pool *pgxpool.Pool, config *effects.Config) *effects.Client {
	tb.Helper()
	client, err := effects.NewClient(pool, config)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, client.Stop(context.Background())) })
	return client
}

// Start starts client's reactor and stops it, within 10s, when the test ends.
func Start(tb testing.TB, client *effects.Client) {
	tb.Helper()
	require.NoError(tb, client.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(tb, client.Stop(ctx))
	})
}

// Wait waits up to within for the effect to settle (CONFIRMED, FAILED or STUCK) and returns it;
// one that does not settle in time fails the test.
func Wait(tb testing.TB, client *effects.Client, id uuid.UUID, within time.Duration) *effects.Effect {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	effect, err := client.Wait(ctx, id)
	require.NoError(tb, err, "effect %s did not settle", id)
	return effect
}

// Path returns the effect's audit trail as "FROM>TO" steps, the insert as ">PENDING";
// observations (a transition from a state to itself) are left out (the public reckontest.Path).
func Path(tb testing.TB, client *effects.Client, id uuid.UUID) []string {
	tb.Helper()
	return public.Path(tb, client, id)
}

// Do sends an HTTP request to url and returns the response, with its body read (and closed). A
// body is sent as application/json, a token as a bearer token; headers are name, value pairs.
func Do(tb testing.TB, method, url, token, body string, headers ...string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(tb, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp, raw
}

// StartChild starts this test binary again as a child process with env added to the environment
// (the package's TestMain reads it and runs the child instead of the tests), and returns once the
// child logs that it is listening. The child is killed when the test ends.
func StartChild(tb testing.TB, env ...string) *proctest.Process {
	tb.Helper()
	p := proctest.Start(tb, env, os.Args[0])
	p.Addr(tb)
	return p
}

// childDBConns is a child reactor's pool size: cmd/reactor's default -db-conns. (pgx's own
// default, max(4, CPUs), leaves a reactor of 20 workers two connections beside its listeners, and
// its calls then wait seconds for a connection on a loaded machine.)
const childDBConns = 20

// RunReactor is the body of a child reactor process (see StartChild): it opens a pool on
// DATABASE_URL as cmd/reactor does, has build make an effects client on it (with logger, which writes JSON lines to
// stderr), starts it, logs "listening" and runs until SIGTERM or an interrupt, then stops the
// client within 10s. It returns the process's exit status: 0, or 1 after logging what failed.
func RunReactor(build func(pool *pgxpool.Pool, logger *slog.Logger) (*effects.Client, error)) int {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	fail := func(msg string, err error) int {
		logger.Error("child: "+msg, slog.String("error", err.Error()))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := postgres.OpenPool(ctx, os.Getenv("DATABASE_URL"), childDBConns, "")
	if err != nil {
		return fail("pool", err)
	}
	defer pool.Close()
	client, err := build(pool, logger)
	if err != nil {
		return fail("client", err)
	}
	if err := client.Start(ctx); err != nil {
		return fail("start", err)
	}
	logger.Info("listening", slog.String("addr", "child-reactor"))
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fail("stop", err)
	}
	return 0
}

// TakeoverBound is how soon after a reactor's SIGKILL a live reactor must have handed its running
// jobs back to River in the takeover tests: LivenessInterval × 2 + TakeoverGrace (4s with the
// defaults) plus room for a loaded test machine. docs/design.md states it.
const TakeoverBound = 10 * time.Second

// KillAndAwaitTakeover SIGKILLs holder while it runs job jobID and waits (at most TakeoverBound)
// until the job is no longer the dead reactor's; the live reactor liveID must have recorded the
// takeover in reckon_reactors. It returns how long after the SIGKILL the job was taken over.
func KillAndAwaitTakeover(tb testing.TB, db Querier, holder *proctest.Process, jobID int64, liveID string) time.Duration {
	tb.Helper()
	ctx := context.Background()
	var owner string
	require.NoError(tb, db.QueryRow(ctx,
		`SELECT attempted_by[cardinality(attempted_by)] FROM river_job WHERE id = $1 AND state = 'running'`, jobID).Scan(&owner),
		"the holder runs the job")
	killed := time.Now()
	holder.Signal(tb, syscall.SIGKILL)
	holder.Wait(tb, 10*time.Second)
	require.Eventually(tb, func() bool {
		return Count(tb, db, `SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running'
			AND attempted_by[cardinality(attempted_by)] = $2`, jobID, owner) == 0
	}, TakeoverBound, 20*time.Millisecond, "the dead reactor's job was not taken over within %v", TakeoverBound)
	took := time.Since(killed)
	tb.Logf("job %d taken over %v after SIGKILL", jobID, took.Round(time.Millisecond))

	var deadAt, lastBeat time.Time
	var by string
	require.NoError(tb, db.QueryRow(ctx, `SELECT dead_at, heartbeat_at, taken_over_by FROM reckon_reactors WHERE id = $1`, owner).
		Scan(&deadAt, &lastBeat, &by))
	require.Equal(tb, liveID, by, "the live reactor recorded the takeover")
	require.False(tb, deadAt.Before(lastBeat))
	return took
}

// RequireNoRunningJobs waits (at most 10s) until no River job is running: once a test's work is
// done, none may be left running without a live worker.
func RequireNoRunningJobs(tb testing.TB, db Querier) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		return Count(tb, db, `SELECT count(*) FROM river_job WHERE state = 'running'`) == 0
	}, 10*time.Second, 20*time.Millisecond, "no River job is left running without a live worker")
}

// AtOnce calls fn(0) … fn(n-1) on n goroutines released together — n callers racing for the same
// row, key or lock — and returns when each has returned.
func AtOnce(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}
