package schedule_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/schedule"
)

// childEnv makes this test binary a child reactor with a scheduler (crash_test.go).
const childEnv = "SCHEDULE_TEST_CHILD"

func TestMain(m *testing.M) { testkit.MainOrChild(m, childEnv, runChild) }

// connector is the connector of the tests' schedules: its calls succeed at once.
const connector = "report.run"

func newRegistry() *effects.Registry {
	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name: connector, Tags: []effects.Tag{effects.TagIdempotent}, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	})
	return registry
}

// newScheduler builds an effects client with a scheduler plugin on pool (not started) and
// returns both; the metrics go to reg (nil: none).
func newScheduler(t *testing.T, pool *pgxpool.Pool, interval time.Duration, reg prometheus.Registerer) (*schedule.Scheduler, *effects.Client) {
	t.Helper()
	s, err := schedule.New(pool, &schedule.Config{Interval: interval, Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	cfg := testkit.FastConfig(newRegistry())
	cfg.Plugins = []effects.Plugin{s}
	return s, testkit.NewClient(t, pool, cfg)
}

// runChild is a child reactor: an effects client with a scheduler that looks every 50ms.
func runChild(string) int {
	return testkit.RunReactor(func(pool *pgxpool.Pool, logger *slog.Logger) (*effects.Client, error) {
		s, err := schedule.New(pool, &schedule.Config{Interval: 50 * time.Millisecond, Logger: logger})
		if err != nil {
			return nil, err
		}
		cfg := testkit.FastConfig(newRegistry())
		cfg.Logger = logger
		cfg.ID = os.Getenv("REACTOR_ID")
		cfg.Plugins = []effects.Plugin{s}
		return effects.NewClient(pool, cfg)
	})
}

// put stores a schedule of connector for tenant acme.
func put(t *testing.T, pool *pgxpool.Pool, def schedule.Definition) *schedule.Schedule {
	t.Helper()
	def.Tenant, def.Connector = "acme", connector
	s, _, err := schedule.Put(context.Background(), pool, newRegistry(), def, "test")
	require.NoError(t, err)
	return s
}

// setNextTick moves a schedule's next tick (a simulated outage: the ticks since are missed).
func setNextTick(t *testing.T, pool *pgxpool.Pool, name string, tick time.Time) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE reckon_schedules SET next_tick = $2 WHERE tenant_id = 'acme' AND name = $1`, name, tick)
	require.NoError(t, err)
}

// ticks is testkit.ScheduledTicks of the tenant acme.
func ticks(t *testing.T, pool *pgxpool.Pool, name string) []time.Time {
	t.Helper()
	return testkit.ScheduledTicks(t, pool, "acme", name)
}

// steadyNow is now truncated to unit, after waiting out the end of the unit when less than 5 s of
// it are left: the rounds of a test that expects a tick at that time then see no later one.
func steadyNow(unit time.Duration) time.Time {
	now := time.Now().UTC()
	if left := now.Truncate(unit).Add(unit).Sub(now); left < 5*time.Second {
		time.Sleep(left + 10*time.Millisecond)
	}
	return time.Now().UTC().Truncate(unit)
}
