package retention_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// With a dedup window, every pruned effect (compensations and effects of runs too) leaves a
// tombstone of its key until its settle time plus the window — except one whose window has passed
// already. A later run deletes the tombstones whose window has passed.
func TestTombstones(t *testing.T) {
	t.Parallel()
	h := setup(t)
	window := func(c *retention.Config) { c.DedupWindow = 60 * day }
	undone := h.effect(effect{settled: 40 * day})
	compensation := h.effect(effect{state: "FAILED", settled: 40 * day, compensates: &undone})
	h.runRow("default", "run", 40*day)
	inRun := h.effect(effect{runID: "run", settled: 45 * day})
	tooOld := h.effect(effect{settled: 61 * day})

	report := h.run(h.retention(0, window))
	require.EqualValues(t, 4, report.Removed[retention.TableEffects])
	type tombstone struct {
		key, state       string
		settled, expires time.Time
	}
	read := func(id any) (tb tombstone, ok bool) {
		err := h.pool.QueryRow(h.ctx, `SELECT idempotency_key, state, settled_at, expires_at FROM reckon_effect_tombstones WHERE effect_id = $1`, id).
			Scan(&tb.key, &tb.state, &tb.settled, &tb.expires)
		return tb, err == nil
	}
	for _, c := range []struct {
		name    string
		id      any
		state   string
		settled time.Duration
	}{{"undone", undone, "CONFIRMED", 40 * day}, {"compensation", compensation, "FAILED", 40 * day}, {"effect of a run", inRun, "CONFIRMED", 45 * day}} {
		tb, ok := read(c.id)
		require.True(t, ok, "%s left a tombstone", c.name)
		require.Equal(t, c.state, tb.state)
		require.WithinDuration(t, h.t0.Add(-c.settled), tb.settled, time.Millisecond)
		require.WithinDuration(t, h.t0.Add(-c.settled+60*day), tb.expires, time.Millisecond)
	}
	_, ok := read(tooOld)
	require.False(t, ok, "its window had passed: no tombstone")

	// 16 days on, the tombstones of the effects settled 45 days before t0 have expired.
	later := h.run(h.retention(16*day, window))
	require.EqualValues(t, 1, later.Removed[retention.TableTombstones])
	_, ok = read(inRun)
	require.False(t, ok)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effect_tombstones`))
}

// A tombstone that exists for a key (an earlier effect of that key, pruned) is replaced by the
// newer effect's when that is pruned in turn, never by an older one.
func TestTombstoneKeepsTheNewer(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id := h.effect(effect{settled: 40 * day})
	var key string
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT idempotency_key FROM reckon_effects WHERE id = $1`, id).Scan(&key))
	h.exec(`INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
	        VALUES ('default', $1, gen_random_uuid(), 'FAILED', $2, $3)`, key, h.t0.Add(-50*day), h.t0.Add(10*day))
	h.run(h.retention(0, func(c *retention.Config) { c.DedupWindow = 60 * day }))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effect_tombstones WHERE effect_id = $1 AND state = 'CONFIRMED'`, id))
}
