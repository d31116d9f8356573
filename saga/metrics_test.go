package saga_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/saga"
)

// TestMetricsPrecreated: a fresh reactor's first scrape, before any saga, has at 0 for each
// registered definition its starts, its transitions to every state and its sagas in every state
// (the saga part of the shared statistics, computed at Start with effects'); a definition
// registered later has its series from the next scrape, and reckon_sagas follows the sagas within
// an interval or two. Lint clean.
func TestMetricsPrecreated(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	h.start(h.effects)

	states := []string{"RUNNING", "COMPLETED", "COMPENSATING", "COMPENSATED", "STUCK"}
	got := testkit.Series(t, h.metrics)
	require.Equal(t, 1.0, got[`reckon_stats_computations_total{part="sagas"}`], "computed at Start")
	require.Contains(t, got, `reckon_saga_started_total{name="order"}`)
	for _, state := range states {
		require.Contains(t, got, `reckon_saga_transitions_total{name="order",to="`+state+`"}`)
		require.Contains(t, got, `reckon_sagas{name="order",state="`+state+`"}`)
	}
	for key, value := range got {
		switch {
		case strings.HasPrefix(key, "reckon_stats_"), key == "reckon_reactors_live{}":
		default:
			require.Zero(t, value, key)
		}
	}

	def := orderSaga(0)
	def.Name = "refund"
	require.NoError(t, h.sagas.Register(def))
	got = testkit.Series(t, h.metrics)
	require.Contains(t, got, `reckon_saga_started_total{name="refund"}`)
	require.Contains(t, got, `reckon_saga_transitions_total{name="refund",to="STUCK"}`)
	require.Contains(t, got, `reckon_sagas{name="refund",state="STUCK"}`)

	s := h.begin(order{Account: "acct-1", Amount: 5, ShipAmount: 5}, nil)
	require.Equal(t, saga.StateCompleted, h.wait(s.ID).State)
	h.eventuallyMetric(1, "reckon_sagas", map[string]string{"name": "order", "state": "COMPLETED"})
	require.Zero(t, h.metric("reckon_sagas", map[string]string{"name": "order", "state": "RUNNING"}))
	require.Equal(t, 1.0, h.metric("reckon_saga_started_total", map[string]string{"name": "order"}))
	require.Equal(t, 1.0, h.metric("reckon_saga_transitions_total", map[string]string{"name": "order", "to": "COMPLETED"}))

	problems, err := testutil.GatherAndLint(h.metrics)
	require.NoError(t, err)
	require.Empty(t, problems)
}
