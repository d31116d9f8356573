package retention_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/retention"
)

// A run makes the histories' partitions ahead of its clock: run on the last day of next month,
// the partitions of the month after next exist (premake 62 days), and a transition written then
// lands in its month's partition, not in the default one.
func TestPartitionsAhead(t *testing.T) {
	t.Parallel()
	h := setup(t)
	pgtest.AllowGhosts(t, "a history row inserted by hand, of an effect that does not exist, to find its partition")
	month := time.Date(h.t0.Year(), h.t0.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastOfNext := month.AddDate(0, 2, -1).Add(12 * time.Hour)
	afterNext := month.AddDate(0, 2, 0)
	report := h.run(h.retention(lastOfNext.Sub(h.t0)))
	require.Positive(t, report.PartitionsCreated)
	for _, parent := range []string{"reckon_effect_transitions", "reckon_saga_transitions", "reckon_definition_changes"} {
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_audit_partitions WHERE parent = $1 AND range_from = $2 AND range_to = $3`,
			parent, afterNext, afterNext.AddDate(0, 1, 0)), "%s: the month after next", parent)
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_audit_partitions WHERE parent = $1 AND range_from <= $2 AND range_to > $2`,
			parent, lastOfNext.Add(61*day)), "%s: covered up to the premake", parent)
	}
	h.exec(`INSERT INTO reckon_effect_transitions (effect_id, tenant_id, to_state, actor, reason, attempt, at)
	        VALUES (gen_random_uuid(), 'default', 'PENDING', 'test', 'later', 0, $1)`, afterNext.Add(time.Hour))
	var partition string
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT tableoid::regclass::text FROM reckon_effect_transitions WHERE reason = 'later'`).Scan(&partition))
	require.Equal(t, "reckon_effect_transitions_p"+afterNext.Format("20060102"), partition)

	created, err := retention.EnsurePartitions(h.ctx, h.pool, lastOfNext)
	require.NoError(t, err)
	require.Zero(t, created, "made already")
}

// Partitions whose range ends before the audit retention are dropped, oldest first, each drop
// recorded in reckon_audit_drops — except those that still tell of an effect or saga that exists,
// which are held and reported, and dropped by the first run after it is gone.
func TestPartitionsDropped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	live := h.effect(effect{state: "PENDING"})
	liveSaga := h.saga("RUNNING", 0)
	h.effect(effect{settled: 40 * day}) // pruned before the drops: holds nothing
	var effectPartition, sagaPartition string
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT tableoid::regclass::text FROM reckon_effect_transitions WHERE effect_id = $1 LIMIT 1`, live).Scan(&effectPartition))
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT tableoid::regclass::text FROM reckon_saga_transitions WHERE saga_id = $1`, liveSaga).Scan(&sagaPartition))

	later := 2 * 365 * day
	cutoff := h.t0.Add(later - 400*day)
	r := h.retention(later, func(c *retention.Config) { c.AuditRetention = 400 * day })
	report, err := r.Run(h.ctx, &retention.RunOpts{Actor: "cli:alice"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{effectPartition, sagaPartition}, report.PartitionsHeld)
	require.NotEmpty(t, report.PartitionsDropped)
	dropped := map[string]bool{}
	for i, p := range report.PartitionsDropped {
		require.False(t, p.To.After(cutoff), "%s ends after the cutoff", p.Partition)
		if i > 0 {
			require.False(t, p.To.Before(report.PartitionsDropped[i-1].To), "oldest first")
		}
		dropped[p.Partition] = true
		var rows int64
		var by string
		require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT row_count, dropped_by FROM reckon_audit_drops WHERE partition = $1`, p.Partition).Scan(&rows, &by))
		require.Equal(t, p.Rows, rows)
		require.Equal(t, "cli:alice", by)
		require.Zero(t, h.count(`SELECT count(*) FROM pg_class WHERE relname = $1`, p.Partition), "%s dropped", p.Partition)
	}
	require.Equal(t, len(dropped), h.count(`SELECT count(*) FROM reckon_audit_drops`))
	// The event log follows Config.EventRetention, 0 here: kept.
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_audit_partitions WHERE range_to <= $1 AND NOT (partition = ANY($2))
		AND parent <> 'reckon_events'`, cutoff, report.PartitionsHeld), "every other partition past the cutoff is gone")
	require.Positive(t, h.count(`SELECT count(*) FROM reckon_effect_transitions WHERE effect_id = $1`, live), "the live effect keeps its history")

	// The live effect settles and is pruned; the saga finishes and is pruned: their partitions go.
	h.exec(`UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'done' WHERE id = $1`, live)
	h.exec(`UPDATE reckon_effects SET updated_at = $2 WHERE id = $1`, live, h.t0)
	h.exec(`UPDATE reckon_sagas SET state = 'COMPLETED', updated_at = $2 WHERE id = $1`, liveSaga, h.t0)
	next, err := r.Run(h.ctx, &retention.RunOpts{Actor: "cli:alice"})
	require.NoError(t, err)
	require.Empty(t, next.PartitionsHeld)
	var names []string
	for _, p := range next.PartitionsDropped {
		names = append(names, p.Partition)
	}
	require.Contains(t, names, effectPartition)
	require.Contains(t, names, sagaPartition)
}

// A partition step that waits for a lock longer than 2s is deferred, not failed: the run goes on
// and reports it, and EnsurePartitions says ErrLockTimeout naming the history.
func TestPartitionLockTimeout(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := h.effect(effect{settled: 300 * day})
	tx, err := h.pool.Begin(h.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(h.ctx) }()
	_, err = tx.Exec(h.ctx, `LOCK TABLE reckon_saga_transitions IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	later := 200 * day // partitions to make for every history
	report := h.run(h.retention(later))
	require.Equal(t, []string{"ensure reckon_saga_transitions"}, report.Deferred)
	require.Positive(t, report.PartitionsCreated, "the other histories' partitions were made")
	require.False(t, h.exists("reckon_effects", old), "and the run went on")

	_, err = retention.EnsurePartitions(h.ctx, h.pool, h.t0.Add(later))
	require.ErrorIs(t, err, retention.ErrLockTimeout)
	require.ErrorContains(t, err, "reckon_saga_transitions")
	require.NoError(t, tx.Rollback(h.ctx))
	created, err := retention.EnsurePartitions(h.ctx, h.pool, h.t0.Add(later))
	require.NoError(t, err)
	require.Positive(t, created)
}
