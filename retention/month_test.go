package retention_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// brokenHistories counts the effects whose audit trail does not start with their insert, breaks
// its chain of states, or does not end in their state: what no reader may ever see.
func (h *harness) brokenHistories() int {
	h.t.Helper()
	return h.count(`
		SELECT count(*) FROM reckon_effects e
		WHERE NOT EXISTS (SELECT 1 FROM reckon_effect_transitions t WHERE t.effect_id = e.id AND t.from_state IS NULL)
		   OR e.state IS DISTINCT FROM (SELECT t.to_state FROM reckon_effect_transitions t WHERE t.effect_id = e.id ORDER BY t.id DESC LIMIT 1)
		   OR EXISTS (
		       SELECT 1 FROM (
		           SELECT t.from_state, lag(t.to_state) OVER (ORDER BY t.id) AS previous, row_number() OVER (ORDER BY t.id) AS n
		           FROM reckon_effect_transitions t WHERE t.effect_id = e.id
		       ) chain
		       WHERE chain.n > 1 AND chain.from_state IS DISTINCT FROM chain.previous)`)
}

// TestRetentionMonthOfHistory fills a database with a month of settled history — effects, effects
// with their compensations, sagas with their steps, runs, turn groups, for a tenant on the global
// retention and two with their own — beside work that is not settled or still referenced, runs
// retention with a 14-day effect retention, and checks every row: exactly those past their
// retention are gone, nothing unsettled or referenced is touched, and every effect left has its
// whole history. Then, 15 months later with a year of audit retention, everything settled is gone,
// the partitions past the audit retention are dropped and recorded except the one that tells of
// the effects still waiting, and those effects' history is intact.
func TestRetentionMonthOfHistory(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.exec(`INSERT INTO reckon_retention_policies (tenant_id, effect_retention_seconds) VALUES ('long', $1), ('short', $2)`,
		int64((90 * day).Seconds()), int64((7 * day).Seconds()))

	type row struct {
		table string
		id    any
	}
	gone := map[row]bool{} // every row made, and whether retention must remove it
	keep := func(table string, id any, pruned bool) { gone[row{table, id}] = pruned }

	for d := range 30 {
		age := time.Duration(d)*day + time.Hour
		past := d >= 14 // older than the 14-day retention

		keep("reckon_effects", h.effect(effect{settled: age}), past)
		keep("reckon_effects", h.effect(effect{state: "FAILED", settled: age}), past)
		keep("reckon_effects", h.effect(effect{tenant: "long", settled: age}), false)
		keep("reckon_effects", h.effect(effect{tenant: "short", settled: age}), d >= 7)

		original := h.effect(effect{settled: age})
		keep("reckon_effects", original, past)
		keep("reckon_effects", h.effect(effect{settled: age, compensates: &original}), past)

		step1, step2 := h.effect(effect{settled: age}), h.effect(effect{settled: age})
		keep("reckon_sagas", h.saga("COMPLETED", age, step1, step2), past)
		keep("reckon_effects", step1, past)
		keep("reckon_effects", step2, past)

		runID := fmt.Sprintf("run-%d", d)
		h.runRow("default", runID, age)
		keep("reckon_runs", runID, past)
		keep("reckon_effects", h.effect(effect{runID: runID, settled: age}), past)
		keep("reckon_effects", h.effect(effect{runID: runID, state: "FAILED", settled: age}), past)

		group := uuid.New()
		session := fmt.Sprintf("default:agent:user-%d:chat", d)
		later := h.turn(turn{session: session, group: group, age: age})
		keep("reckon_turns", h.turn(turn{session: session, group: group, status: "SUPERSEDED", age: age + time.Minute, supersededBy: &later}), past)
		keep("reckon_turns", later, past)
		keep("reckon_effects", h.effect(effect{turnGroup: group.String(), settled: age}), past)
	}

	// Never pruned, however old: unsettled effects, a live saga's settled step, a run still
	// working, a turn group with a turn in flight, effects whose compensation is pending or recent.
	old := 29*day + time.Hour
	for _, state := range []string{"PENDING", "UNKNOWN", "STUCK"} {
		keep("reckon_effects", h.effect(effect{state: state, settled: old}), false)
	}
	for _, state := range []string{"RUNNING", "COMPENSATING", "STUCK"} {
		step := h.effect(effect{settled: old})
		keep("reckon_sagas", h.saga(state, old, step), false)
		keep("reckon_effects", step, false)
	}
	h.runRow("default", "run-busy", old)
	keep("reckon_runs", "run-busy", false)
	keep("reckon_effects", h.effect(effect{runID: "run-busy", settled: old}), false)
	keep("reckon_effects", h.effect(effect{runID: "run-busy", state: "PENDING", settled: old}), false)
	busyGroup := uuid.New()
	keep("reckon_turns", h.turn(turn{session: "default:agent:busy:chat", group: busyGroup, status: "FAILED", age: old}), false)
	keep("reckon_turns", h.turn(turn{session: "default:agent:busy:chat", group: busyGroup, status: "PROCESSING", age: day}), false)
	keep("reckon_effects", h.effect(effect{turnGroup: busyGroup.String(), settled: old}), false)
	for _, compensation := range []effect{{state: "PENDING", settled: old}, {settled: day}} {
		original := h.effect(effect{settled: old})
		compensation.compensates = &original
		keep("reckon_effects", original, false)
		keep("reckon_effects", h.effect(compensation), false)
	}

	before := map[string]int{}
	for r := range gone {
		before[r.table]++
	}
	require.Zero(t, h.brokenHistories())

	// Today, with 14 days of effect retention.
	report := h.run(h.retention(0, func(c *retention.Config) { c.EffectRetention = 14 * day; c.BatchSize = 7 }))
	removed := map[string]int{}
	for r, pruned := range gone {
		exists := h.exists(r.table, r.id)
		if r.table == "reckon_runs" {
			exists = h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'default' AND id = $1`, r.id) == 1
		}
		require.Equal(t, !pruned, exists, "%s %v: pruned %v", r.table, r.id, pruned)
		if pruned {
			removed[r.table]++
		}
	}
	for table, n := range removed {
		require.Equal(t, int64(n), report.Removed[table], table)
	}
	// Each turn was made with one message and one decision.
	require.Equal(t, before["reckon_turns"]-removed["reckon_turns"], h.count(`SELECT count(*) FROM reckon_turn_decisions`), "a turn's decisions go with it")
	require.Equal(t, before["reckon_turns"]-removed["reckon_turns"], h.count(`SELECT count(*) FROM reckon_messages`), "a turn's messages go with it")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_saga_steps s WHERE NOT EXISTS (SELECT 1 FROM reckon_sagas g WHERE g.id = s.saga_id)`))
	require.Zero(t, h.brokenHistories(), "no effect left with part of its history")
	require.Equal(t, removed["reckon_effects"], h.count(`
		SELECT count(DISTINCT t.effect_id) FROM reckon_effect_transitions t
		WHERE NOT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.id = t.effect_id)`), "the pruned effects' history stays")
	require.Empty(t, report.PartitionsDropped, "no audit retention: no history dropped")

	// Fifteen months later, with a year of audit retention.
	later := 15 * 30 * day
	report = h.run(h.retention(later, func(c *retention.Config) { c.AuditRetention = 365 * day }))
	require.Equal(t, 3+3+2+1+2, h.count(`SELECT count(*) FROM reckon_effects`), "only what waits, and what it holds, is left")
	require.Zero(t, h.brokenHistories(), "the history of what is left is whole")
	require.NotEmpty(t, report.PartitionsDropped)
	require.Contains(t, report.PartitionsHeld, "reckon_effect_transitions_p0", "it tells of the effects still waiting")
	require.Contains(t, report.PartitionsHeld, "reckon_saga_transitions_p0", "it tells of the sagas still running")
	recorded := h.count(`SELECT count(*) FROM reckon_audit_drops WHERE dropped_by = 'test'`)
	require.Equal(t, len(report.PartitionsDropped), recorded)
	for _, p := range report.PartitionsDropped {
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_audit_drops WHERE partition = $1 AND parent = $2 AND row_count = $3`,
			p.Partition, p.Parent, p.Rows), p.Partition)
		require.Zero(t, h.count(`SELECT count(*) FROM reckon_audit_partitions WHERE partition = $1`, p.Partition))
		require.False(t, p.To.After(h.t0.Add(later-365*day)), "%s ends before the audit cutoff", p.Partition)
	}
	require.Positive(t, h.count(`SELECT count(*) FROM reckon_audit_partitions WHERE range_to > $1`, h.t0.Add(later)),
		"partitions ahead of the moved clock")
}
