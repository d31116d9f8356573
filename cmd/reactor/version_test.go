package main

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestVersion: `reactor version` and `reactor -version` print one line naming the Go version that
// built the binary and its commit (or "(devel)", for a build that recorded none), on stdout, exit
// 0, without a database — even with a configuration the reactor would refuse. -o json prints the
// same as an object.
func TestVersion(t *testing.T) {
	t.Parallel()
	reactor := proctest.Binary(t, "reactor")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "RECKON_WORKERS=many"}

	for _, args := range [][]string{{"version"}, {"-version"}, {"-workers", "0", "-version"}} {
		res := proctest.Run(t, env, reactor, args...)
		require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Empty(t, res.Stderr, "%v", args)
		proctest.RequireVersionLine(t, "reactor", res.Stdout)
	}

	res := proctest.Run(t, env, reactor, "version", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var info struct {
		Name      string `json:"name"`
		GoVersion string `json:"go_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &info), res.Stdout)
	require.Equal(t, "reckon reactor", info.Name)
	require.Equal(t, runtime.Version(), info.GoVersion)

	for _, args := range [][]string{{"version", "-o", "yaml"}, {"version", "extra"}} {
		res := proctest.Run(t, env, reactor, args...)
		require.Equal(t, 2, res.ExitCode, "%v", args)
		require.Empty(t, res.Stdout, "%v", args)
		require.Contains(t, res.Stderr, "reactor: ", "%v", args)
	}
}
