package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestLogLevel: -log-level (and RECKON_LOG_LEVEL; the flag wins) sets the least severe record
// logged: at debug the debug lines appear (the server's migrations, the reactor's note that it has
// no default turn handler), at the default (info) none does; an unknown level is exit status 2
// naming the flag, before anything else happens.
func TestLogLevel(t *testing.T) {
	t.Parallel()
	server, reactor := proctest.Binary(t, "server"), proctest.Binary(t, "reactor")
	env := []string{"DATABASE_URL=" + pgtest.NewEmptyDB(t).Config().ConnString()}
	levels := func(stderr string) map[string]int {
		out := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			var entry struct{ Level string }
			if json.Unmarshal([]byte(line), &entry) == nil {
				out[entry.Level]++
			}
		}
		return out
	}

	migrate := func(env []string, args ...string) map[string]int {
		for _, direction := range [][]string{{"down", "-all"}, {"up"}} {
			res := proctest.Run(t, env, server, append(append([]string{"migrate"}, direction...), append(args, "-log-format", "json")...)...)
			require.Equal(t, 0, res.ExitCode, res.Stderr)
			if direction[0] == "up" {
				return levels(res.Stderr)
			}
		}
		return nil
	}
	require.Positive(t, migrate(env, "-log-level", "debug")["DEBUG"], "applied migrations are debug lines")
	require.Zero(t, migrate(env)["DEBUG"], "not at the default level")
	require.Positive(t, migrate(append(env, "RECKON_LOG_LEVEL=DEBUG"))["DEBUG"], "any case")
	require.Zero(t, migrate(append(env, "RECKON_LOG_LEVEL=debug"), "-log-level", "warn")["DEBUG"], "the flag over the variable")

	serve := func(bin string, env []string, args ...string) map[string]int {
		p := proctest.Start(t, env, bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
		p.Addr(t)
		p.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, p.Wait(t, 30*time.Second), p.Stderr())
		return levels(p.Stderr())
	}
	debug := serve(reactor, env, "-log-level", "debug")
	require.Positive(t, debug["DEBUG"], "the reactor at debug: %v", debug)
	require.Positive(t, debug["INFO"])
	info := serve(reactor, env)
	require.Zero(t, info["DEBUG"], "the reactor at the default: %v", info)
	require.Positive(t, info["INFO"])
	require.Positive(t, serve(reactor, append(env, "RECKON_LOG_LEVEL=debug"))["DEBUG"])
	require.Zero(t, serve(server, env)["DEBUG"])
	require.Positive(t, serve(server, env, "-log-level", "info")["INFO"])

	for _, bin := range []string{server, reactor} {
		res := proctest.Run(t, env, bin, "-log-level", "verbose")
		require.Equal(t, 2, res.ExitCode, res.Stderr)
		require.Contains(t, res.Stderr, `-log-level "verbose"`)
		res = proctest.Run(t, append(env, "RECKON_LOG_LEVEL=loud"), bin)
		require.Equal(t, 2, res.ExitCode, res.Stderr)
		require.Contains(t, res.Stderr, `-log-level "loud" (or RECKON_LOG_LEVEL)`)
	}
	res := proctest.Run(t, env, server, "migrate", "status", "-log-level", "chatty")
	require.Equal(t, 2, res.ExitCode, "every command: %s", res.Stderr)
	require.Contains(t, res.Stderr, `-log-level "chatty"`)
}
