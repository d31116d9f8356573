package retention_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/retention"
)

// The metrics exist at 0 for every table and result before any run, and count what real runs do;
// dry runs count in none of them.
func TestMetrics(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.retention(0, func(c *retention.Config) { c.Registerer = h.metrics })
	families, err := h.metrics.Gather()
	require.NoError(t, err)
	labels := map[string][]string{}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				labels[family.GetName()] = append(labels[family.GetName()], label.GetValue())
			}
		}
	}
	require.Contains(t, labels["reckon_retention_rows_pruned_total"], retention.TableTurnDecisions)
	require.Len(t, labels["reckon_retention_rows_pruned_total"], 12)
	require.ElementsMatch(t, []string{"ok", "error", "busy"}, labels["reckon_retention_runs_total"])
	require.ElementsMatch(t, []string{"reckon_effect_transitions", "reckon_saga_transitions", "reckon_definition_changes", "reckon_events"}, labels["reckon_retention_partitions_dropped_total"])

	h.effect(effect{settled: 40 * day})
	h.effect(effect{settled: 40 * day})
	_, err = r.Run(h.ctx, &retention.RunOpts{Actor: "test", DryRun: true})
	require.NoError(t, err)
	require.Zero(t, testkit.Metric(t, h.metrics, "reckon_retention_runs_total", map[string]string{"result": "ok"}), "a dry run counts nowhere")
	h.run(r)
	require.EqualValues(t, 2, testkit.Metric(t, h.metrics, "reckon_retention_rows_pruned_total", map[string]string{"table": retention.TableEffects}))
	require.EqualValues(t, 1, testkit.Metric(t, h.metrics, "reckon_retention_runs_total", map[string]string{"result": "ok"}))
	require.Positive(t, testkit.Metric(t, h.metrics, "reckon_retention_last_success_timestamp_seconds", nil))

	_, err = retention.New(h.pool, &retention.Config{Registerer: h.metrics})
	require.ErrorContains(t, err, "register metrics", "twice on one registry")
}
