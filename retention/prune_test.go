package retention_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// Finished sagas (COMPLETED, COMPENSATED) past the retention go with their steps, and their step
// effects with them in the same run; their history stays. RUNNING, COMPENSATING and STUCK sagas
// stay, however old, with their steps' effects; recent finished ones stay.
func TestSagas(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	completedStep := h.effect(effect{settled: old})
	completed := h.saga("COMPLETED", old, completedStep)
	compensated := h.saga("COMPENSATED", 31*day, h.effect(effect{state: "FAILED", settled: old}))
	recentStep := h.effect(effect{settled: old})
	recent := h.saga("COMPLETED", 29*day, recentStep)
	kept := map[string]bool{}
	for _, state := range []string{"RUNNING", "COMPENSATING", "STUCK"} {
		step := h.effect(effect{settled: old})
		id := h.saga(state, 400*day, step)
		kept[id.String()] = h.exists("reckon_effects", step)
	}

	report := h.run(h.retention(0))
	require.False(t, h.exists("reckon_sagas", completed))
	require.False(t, h.exists("reckon_sagas", compensated))
	require.False(t, h.exists("reckon_effects", completedStep), "the step's effect goes after its saga, in the same run")
	require.True(t, h.exists("reckon_sagas", recent))
	require.True(t, h.exists("reckon_effects", recentStep))
	for id := range kept {
		require.True(t, h.exists("reckon_sagas", id), "unfinished saga %s kept", id)
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_saga_steps s JOIN reckon_effects e ON e.id = s.effect_id WHERE s.saga_id = $1`, id))
	}
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_saga_steps WHERE saga_id = $1`, completed))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_saga_transitions WHERE saga_id = $1`, completed), "saga history stays")
	require.EqualValues(t, 2, report.Removed[retention.TableSagas])
	require.EqualValues(t, 2, report.Removed[retention.TableSagaSteps])
	require.EqualValues(t, 2, report.Removed[retention.TableEffects])
}
