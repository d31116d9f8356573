package retention_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/retention"
)

// wire is a Go connector that confirms every call.
func wire() effects.Connector {
	return effects.Connector{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		},
	}
}

// Effects made and settled through the effects API — alone, and in a run started with its
// guardrails — are pruned past the retention: the API no longer finds them, nor the run; a run of
// the same id started afterwards is a new one.
func TestPrunesWhatTheAPIMade(t *testing.T) {
	t.Parallel()
	h := setup(t)
	registry := effects.NewRegistry()
	require.NoError(t, registry.Register(wire()))
	client := testkit.NewClient(t, h.pool, testkit.FastConfig(registry))
	alone, err := client.Do(h.ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "alone", Args: map[string]any{"amount": 1}})
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, alone.State)
	_, err = client.StartRun(h.ctx, effects.RunSpec{ID: "agent-run", MaxSteps: 2})
	require.NoError(t, err)
	for _, key := range []string{"step-1", "step-2"} {
		e, err := client.Do(h.ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: key, RunID: "agent-run"})
		require.NoError(t, err)
		require.Equal(t, effects.StateConfirmed, e.State)
	}
	_, err = client.Do(h.ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "step-3", RunID: "agent-run"})
	require.ErrorIs(t, err, effects.ErrRunMaxSteps)

	report := h.run(h.retention(29 * day))
	require.Zero(t, report.RemovedTotal(), "not yet")
	report = h.run(h.retention(31 * day))
	requireRemoved(t, report, map[string]int64{retention.TableEffects: 3, retention.TableRuns: 1})
	_, err = client.Get(h.ctx, alone.ID)
	require.ErrorIs(t, err, effects.ErrNotFound)
	_, err = client.GetRun(h.ctx, "agent-run", nil)
	require.ErrorIs(t, err, effects.ErrRunNotFound)

	again, err := client.Do(h.ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "alone", Args: map[string]any{"amount": 1}})
	require.NoError(t, err)
	require.False(t, again.Deduplicated, "a pruned effect's key is free (no dedup window)")
	require.NotEqual(t, alone.ID, again.ID)
}

// Installed as a plugin, the Retention runs when the reactor starts (on the leader), recorded with
// the actor retention:{reactor id}.
func TestInstall(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := h.effect(effect{settled: 40 * day})
	r := h.retention(0)
	registry := effects.NewRegistry()
	config := testkit.FastConfig(registry)
	config.ID = "reactor-1"
	config.Plugins = []effects.Plugin{r}
	client := testkit.NewClient(t, h.pool, config)
	testkit.Start(t, client)
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_retention_runs WHERE actor = 'retention:reactor-1' AND finished_at IS NOT NULL AND error IS NULL`) == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.False(t, h.exists("reckon_effects", old))
}
