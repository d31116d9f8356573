package retention_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// Status shows the settings, each table's size and oldest row, the partitions with what the next
// run does to them, the dry run of the next run, and the last runs: ok, failed, interrupted (never
// finished, no lock held) or running (unfinished while the lock is held).
func TestStatus(t *testing.T) {
	t.Parallel()
	h := setup(t)
	live := h.effect(effect{state: "PENDING", settled: 500 * day})
	h.effect(effect{settled: 40 * day})
	h.effect(effect{settled: 10 * day})
	_, err := retention.SetPolicy(h.ctx, h.pool, "acme", 2*time.Hour)
	require.NoError(t, err)
	h.exec(`INSERT INTO reckon_retention_runs (actor, started_at) VALUES ('retention:dead', $1)`, h.t0.Add(-2*time.Hour))
	h.exec(`INSERT INTO reckon_retention_runs (actor, started_at, finished_at, error) VALUES ('cli:bob', $1, $1, 'boom')`, h.t0.Add(-time.Hour))

	later := 2 * 365 * day
	r := h.retention(later, func(c *retention.Config) { c.AuditRetention = 400 * day; c.DedupWindow = day })
	s, err := r.Status(h.ctx)
	require.NoError(t, err)
	require.Equal(t, 30*day, s.EffectRetention)
	require.Equal(t, 400*day, s.AuditRetention)
	require.Equal(t, day, s.DedupWindow)
	require.Equal(t, retention.AuditSettings{Period: "month", Premake: 62 * day}, s.Audit)
	require.Len(t, s.Policies, 1)

	tables := map[string]retention.TableStatus{}
	for _, table := range s.Tables {
		tables[table.Name] = table
	}
	require.Positive(t, tables["reckon_effects"].Bytes)
	require.WithinDuration(t, h.t0.Add(-40*day), tables["reckon_effects"].Oldest["settled"], time.Millisecond)
	require.WithinDuration(t, h.t0.Add(-500*day), tables["reckon_effects"].Oldest["unresolved"], time.Millisecond)
	require.Contains(t, tables["reckon_effect_transitions"].Partitions, "reckon_effect_transitions_default")
	require.Positive(t, tables["reckon_effect_transitions"].Bytes)
	require.Contains(t, tables, "river_job")

	require.True(t, s.Next.DryRun)
	require.EqualValues(t, 2, s.Next.Removed[retention.TableEffects])
	require.Positive(t, s.Next.PartitionsCreated, "two years on, partitions are to be made")
	var heldPartition string
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT tableoid::regclass::text FROM reckon_effect_transitions WHERE effect_id = $1 LIMIT 1`, live).Scan(&heldPartition))
	require.Contains(t, s.Next.PartitionsHeld, heldPartition)
	states := map[string]retention.PartitionStatus{}
	for _, p := range s.Partitions {
		states[p.Name] = p
	}
	require.True(t, states[heldPartition].Held)
	require.False(t, states[heldPartition].Drop)
	require.True(t, states["reckon_definition_changes_p0"].Drop)
	require.Nil(t, states["reckon_definition_changes_default"].To)

	require.Len(t, s.Runs, 2)
	require.Equal(t, "failed", s.Runs[0].State)
	require.Equal(t, "boom", s.Runs[0].Error)
	require.Equal(t, "interrupted", s.Runs[1].State)

	h.holdLock()
	h.exec(`INSERT INTO reckon_retention_runs (actor, started_at) VALUES ('retention:live', $1)`, h.t0)
	s, err = r.Status(h.ctx)
	require.NoError(t, err)
	require.Equal(t, "running", s.Runs[0].State)
	require.Equal(t, "interrupted", s.Runs[2].State)
	require.EqualValues(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'CONFIRMED' AND updated_at < $1`, h.t0.Add(-30*day)), "status changed nothing")
}
