package testkit_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
)

// Metric reads counters and gauges by their exact label set, and 0 for what is not there.
func TestMetric(t *testing.T) {
	t.Parallel()
	registry := prometheus.NewRegistry()
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_total"}, []string{"state"})
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_depth"})
	registry.MustRegister(counter, gauge)
	counter.WithLabelValues("CONFIRMED").Add(3)
	counter.WithLabelValues("FAILED").Inc()
	gauge.Set(7)

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"test_total", map[string]string{"state": "CONFIRMED"}, 3},
		{"test_total", map[string]string{"state": "FAILED"}, 1},
		{"test_total", map[string]string{"state": "STUCK"}, 0},
		{"test_total", map[string]string{}, 0},
		{"test_total", map[string]string{"state": "CONFIRMED", "connector": "bank.wire"}, 0},
		{"test_depth", nil, 7},
		{"test_missing", nil, 0},
	} {
		require.Equal(t, tc.want, testkit.Metric(t, registry, tc.name, tc.labels), "%s %v", tc.name, tc.labels)
	}
}
