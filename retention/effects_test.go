package retention_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// Settled effects (CONFIRMED, FAILED) past the effect retention go; recent ones and unsettled ones
// (PENDING, UNKNOWN, STUCK), however old, stay. The history of a pruned effect stays.
func TestEffectsPastRetention(t *testing.T) {
	t.Parallel()
	h := setup(t)
	confirmed := h.effect(effect{settled: 40 * day})
	failed := h.effect(effect{state: "FAILED", settled: 31 * day})
	recent := h.effect(effect{settled: 29 * day})
	kept := []uuid.UUID{recent}
	for _, state := range []string{"PENDING", "UNKNOWN", "STUCK"} {
		kept = append(kept, h.effect(effect{state: state, settled: 400 * day}))
	}

	report := h.run(h.retention(0))
	require.False(t, h.exists("reckon_effects", confirmed))
	require.False(t, h.exists("reckon_effects", failed))
	for _, id := range kept {
		require.True(t, h.exists("reckon_effects", id), "effect %s kept", id)
	}
	require.EqualValues(t, 2, report.Removed[retention.TableEffects])
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effect_transitions WHERE effect_id = $1`, confirmed),
		"the pruned effect's history stays until its partition is dropped")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effect_tombstones`), "no tombstones without a dedup window")

	again := h.run(h.retention(0))
	require.Zero(t, again.RemovedTotal(), "a second run finds nothing")
}

// An effect still referred to stays: a saga's step, an effect of a turn group that still has a
// turn, one whose compensation is unsettled or recent. A compensation goes with the effect it undoes,
// never alone; an effect and its old settled compensation go together.
func TestEffectsReferencedAreKept(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	step := h.effect(effect{settled: old})
	h.saga("RUNNING", old, step)

	group := uuid.New()
	h.turn(turn{group: group, status: "ACCUMULATING", age: old})
	inGroup := h.effect(effect{settled: old, turnGroup: group.String()})

	pendingUndone := h.effect(effect{settled: old})
	pendingCompensation := h.effect(effect{state: "PENDING", settled: old, compensates: &pendingUndone})
	recentUndone := h.effect(effect{settled: old})
	recentCompensation := h.effect(effect{settled: day, compensates: &recentUndone})

	undone := h.effect(effect{settled: old})
	compensation := h.effect(effect{state: "FAILED", settled: old, compensates: &undone})
	youngUndone := h.effect(effect{settled: day})
	lonely := h.effect(effect{settled: old, compensates: &youngUndone})

	notAGroup := h.effect(effect{settled: old, turnGroup: "not-a-uuid"})
	orphanRun := h.effect(effect{settled: old, runID: "run-without-row"})

	report := h.run(h.retention(0))
	for name, id := range map[string]uuid.UUID{
		"saga step": step, "turn group with a turn": inGroup, "compensation pending": pendingUndone, "pending compensation": pendingCompensation,
		"compensation recent": recentUndone, "recent compensation": recentCompensation, "compensation of a recent effect": lonely,
		"recent effect": youngUndone,
	} {
		require.True(t, h.exists("reckon_effects", id), "%s kept", name)
	}
	for name, id := range map[string]uuid.UUID{
		"undone": undone, "its compensation": compensation, "text turn group": notAGroup, "run id without a run": orphanRun,
	} {
		require.False(t, h.exists("reckon_effects", id), "%s pruned", name)
	}
	require.EqualValues(t, 4, report.Removed[retention.TableEffects])
}
