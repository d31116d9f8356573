package retention_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// With BatchSize 3, ten effects and ten turn groups go in four batches each (3, 3, 3, 1): a run
// goes on until a batch finds fewer than BatchSize.
func TestBatches(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for range 10 {
		h.effect(effect{settled: 40 * day})
		group := uuid.New()
		h.turn(turn{group: group, age: 40 * day})
		h.turn(turn{group: group, age: 40 * day})
	}
	r := h.retention(0, func(c *retention.Config) { c.BatchSize = 3 })
	batches := map[string]int{}
	retention.SetAfterBatch(r, func(phase string) { batches[phase]++ })
	report := h.run(r)
	requireRemoved(t, report, map[string]int64{retention.TableEffects: 10, retention.TableTurns: 20})
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_turns`))
	require.Equal(t, 4, batches["effects"])
	require.GreaterOrEqual(t, batches["turns"], 4)
}

// A run whose context ends between two batches stops there: what the committed batches removed is
// gone, every turn group is whole or gone, the run is recorded with its error, and the next run
// removes the rest.
func TestInterruptedRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	groups := make([]uuid.UUID, 5)
	for i := range groups {
		groups[i] = uuid.New()
		for range 3 {
			h.turn(turn{group: groups[i], age: 40 * day})
		}
	}
	r := h.retention(0, func(c *retention.Config) { c.BatchSize = 1 })
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	retention.SetAfterBatch(r, func(phase string) {
		if phase == "turns" {
			cancel()
		}
	})
	report, err := r.Run(ctx, &retention.RunOpts{Actor: "test"})
	require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	require.EqualValues(t, 3, report.Removed[retention.TableTurns], "one group, whole")
	left := 0
	for _, group := range groups {
		n := h.count(`SELECT count(*) FROM reckon_turns WHERE turn_group = $1`, group)
		require.Contains(t, []int{0, 3}, n, "group %s whole or gone", group)
		left += n
	}
	require.Equal(t, 12, left)
	require.Equal(t, 12, h.count(`SELECT count(*) FROM reckon_messages`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_retention_runs WHERE finished_at IS NOT NULL AND error LIKE '%context canceled%'`))

	retention.SetAfterBatch(r, nil)
	next := h.run(r)
	require.EqualValues(t, 12, next.Removed[retention.TableTurns])
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_turns`))
}
