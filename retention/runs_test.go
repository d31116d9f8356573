package retention_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// A run goes whole with its effects (compensations included) once it and every effect of it are
// settled past the cutoff. A run with one unsettled effect, one recent effect, an effect that is a
// saga's step, or a recent change of its own stays whole: its effects are never pruned alone,
// which would change its guardrail counts. Runs are per tenant.
func TestRuns(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	h.runRow("default", "done", old)
	done := []uuid.UUID{h.effect(effect{runID: "done", settled: old}), h.effect(effect{runID: "done", state: "FAILED", settled: 35 * day})}
	done = append(done, h.effect(effect{runID: "done", settled: old, compensates: &done[0]}))
	h.runRow("acme", "done", old) // the same run id, another tenant's run: its own
	acmeLive := h.effect(effect{tenant: "acme", runID: "done", state: "PENDING", settled: old})
	acmeSettled := h.effect(effect{tenant: "acme", runID: "done", settled: old})

	kept := map[string][]uuid.UUID{}
	h.runRow("default", "recent-effect", old)
	kept["recent-effect"] = []uuid.UUID{h.effect(effect{runID: "recent-effect", settled: old}), h.effect(effect{runID: "recent-effect", settled: day})}
	h.runRow("default", "stuck", old)
	kept["stuck"] = []uuid.UUID{h.effect(effect{runID: "stuck", settled: old}), h.effect(effect{runID: "stuck", state: "STUCK", settled: old})}
	h.runRow("default", "saga", old)
	sagaStep := h.effect(effect{runID: "saga", settled: old})
	h.saga("RUNNING", old, sagaStep)
	kept["saga"] = []uuid.UUID{sagaStep, h.effect(effect{runID: "saga", settled: old})}
	h.runRow("default", "touched", day)
	kept["touched"] = []uuid.UUID{h.effect(effect{runID: "touched", settled: old})}
	h.runRow("default", "empty", old)

	report := h.run(h.retention(0))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'default' AND id IN ('done', 'empty')`))
	for _, id := range done {
		require.False(t, h.exists("reckon_effects", id))
	}
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'acme' AND id = 'done'`), "acme's run has a PENDING effect")
	require.True(t, h.exists("reckon_effects", acmeLive))
	require.True(t, h.exists("reckon_effects", acmeSettled), "an effect of a live run is never pruned alone")
	for run, ids := range kept {
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'default' AND id = $1`, run), "run %s kept", run)
		for _, id := range ids {
			require.True(t, h.exists("reckon_effects", id), "effect of run %s kept", run)
		}
	}
	require.EqualValues(t, 2, report.Removed[retention.TableRuns])
	require.EqualValues(t, 3, report.Removed[retention.TableEffects])
}
