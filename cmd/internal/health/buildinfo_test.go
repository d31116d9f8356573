package health_test

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/internal/health"
)

// TestBuildInfo: every registry from NewRegistry has reckon_build_info = 1 with this binary's Go
// version and a version and revision label that are never empty, and it lints clean.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	registry := health.NewRegistry()
	families, err := registry.Gather()
	require.NoError(t, err)
	var found bool
	for _, family := range families {
		if family.GetName() != "reckon_build_info" {
			continue
		}
		found = true
		require.Len(t, family.GetMetric(), 1)
		metric := family.GetMetric()[0]
		require.Equal(t, 1.0, metric.GetGauge().GetValue())
		labels := map[string]string{}
		for _, pair := range metric.GetLabel() {
			labels[pair.GetName()] = pair.GetValue()
		}
		require.Equal(t, runtime.Version(), labels["goversion"])
		require.NotEmpty(t, labels["version"])
		require.NotEmpty(t, labels["revision"])
		require.Len(t, labels, 3)
	}
	require.True(t, found, "reckon_build_info missing")
	problems, err := testutil.GatherAndLint(registry, "reckon_build_info")
	require.NoError(t, err)
	require.Empty(t, problems)
}
