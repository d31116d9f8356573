package main

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestVersion: `server version` and `server -version` print one line naming the Go version that
// built the binary and its commit (or "(devel)", for a build that recorded none), on stdout, exit
// 0, without a database — even with a configuration serve would refuse. -o json prints the same
// as an object.
func TestVersion(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1", "RECKON_DB_CONNS=many"}

	for _, args := range [][]string{{"version"}, {"-version"}, {"-addr", "127.0.0.1:0", "-version"}} {
		res := proctest.Run(t, env, server, args...)
		require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Empty(t, res.Stderr, "%v", args)
		proctest.RequireVersionLine(t, "server", res.Stdout)
	}

	res := proctest.Run(t, env, server, "version", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var info struct {
		Name      string `json:"name"`
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &info), res.Stdout)
	require.Equal(t, "reckon server", info.Name)
	require.Equal(t, runtime.Version(), info.GoVersion)
	require.NotEmpty(t, info.Version)

	res = proctest.Run(t, env, server, "version", "-o", "yaml")
	require.Equal(t, 2, res.ExitCode)
	require.Empty(t, res.Stdout)
	require.Contains(t, res.Stderr, `-o "yaml": want text or json`)
}
