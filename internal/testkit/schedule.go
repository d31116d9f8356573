package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// ScheduledTicks returns the ticks the schedule name of tenant enqueued, in order, read from its
// effects' idempotency keys (schedule/{name}/{tick}), and fails unless each tick has one effect,
// inserted once.
func ScheduledTicks(t *testing.T, pool *pgxpool.Pool, tenant, name string) []time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT e.idempotency_key, count(*) OVER (PARTITION BY e.idempotency_key),
		       (SELECT count(*) FROM reckon_effect_transitions tr WHERE tr.effect_id = e.id AND tr.from_state IS NULL)
		FROM reckon_effects e WHERE e.tenant_id = $1 AND e.idempotency_key LIKE 'schedule/' || $2 || '/%'
		ORDER BY e.idempotency_key`, tenant, name)
	require.NoError(t, err)
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var key string
		var copies, inserts int
		require.NoError(t, rows.Scan(&key, &copies, &inserts))
		require.Equal(t, 1, copies, "tick %s has one effect", key)
		require.Equal(t, 1, inserts, "tick %s was inserted once", key)
		tick, err := time.Parse(time.RFC3339, key[len("schedule/"+name+"/"):])
		require.NoError(t, err)
		out = append(out, tick)
	}
	require.NoError(t, rows.Err())
	return out
}

// RequireConsecutive fails unless ticks are every step apart, without a gap.
func RequireConsecutive(t *testing.T, ticks []time.Time, step time.Duration) {
	t.Helper()
	for i := 1; i < len(ticks); i++ {
		require.Equal(t, step, ticks[i].Sub(ticks[i-1]), "no tick missing between %s and %s", ticks[i-1], ticks[i])
	}
}

// RequireTickedThrough waits until the schedule's next tick is after ended — the reactors alive
// then have caught up on what killed ones left due — and requires its ticks (ScheduledTicks: each
// once) every step apart from at most a step after began to at least a step before ended. It
// returns them.
func RequireTickedThrough(t *testing.T, pool *pgxpool.Pool, tenant, name string, step time.Duration, began, ended time.Time) []time.Time {
	t.Helper()
	require.Eventually(t, func() bool {
		var next time.Time
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT next_tick FROM reckon_schedules WHERE tenant_id = $1 AND name = $2`, tenant, name).Scan(&next))
		return next.After(ended)
	}, 20*time.Second, 50*time.Millisecond, "the live reactors catch up")
	ticks := ScheduledTicks(t, pool, tenant, name)
	require.NotEmpty(t, ticks)
	RequireConsecutive(t, ticks, step)
	require.False(t, ticks[0].After(began.Add(step)), "the window's first tick is there: %s", ticks[0])
	require.False(t, ticks[len(ticks)-1].Before(ended.Add(-step)), "the window's last tick is there: %s", ticks[len(ticks)-1])
	return ticks
}
