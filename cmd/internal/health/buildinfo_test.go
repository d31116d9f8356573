package health_test

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/internal/health"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestBuildInfo: every registry from NewRegistry has reckon_build_info = 1 with this binary's Go
// version and a version and revision label that are never empty, and it lints clean.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	registry := health.NewRegistry()
	moduleVersion, revision, goVersion := health.Version()
	require.NotEmpty(t, moduleVersion)
	require.NotEmpty(t, revision)
	require.Equal(t, runtime.Version(), goVersion)
	labels := map[string]string{"version": moduleVersion, "revision": revision, "goversion": goVersion}
	require.Equal(t, 1.0, testkit.Metric(t, registry, "reckon_build_info", labels), "reckon_build_info with exactly these labels")
	count, err := testutil.GatherAndCount(registry, "reckon_build_info")
	require.NoError(t, err)
	require.Equal(t, 1, count, "one series")
	problems, err := testutil.GatherAndLint(registry, "reckon_build_info")
	require.NoError(t, err)
	require.Empty(t, problems)
}
