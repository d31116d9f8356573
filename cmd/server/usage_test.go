package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestHelp: `server -h` and `server help` list every command; every command and every action has
// -h (usage on stdout, nothing on stderr, exit 0), without touching the database.
func TestHelp(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}

	top := proctest.Run(t, env, server, "-h")
	require.Equal(t, 0, top.ExitCode, top.Stderr)
	require.Empty(t, top.Stderr)
	for _, command := range []string{"migrate", "tenants", "tokens", "operators", "connectors", "sagas", "events", "mcp", "version", "healthcheck", "help"} {
		require.Contains(t, top.Stdout, "\n  "+command+" ", "server -h lists %s", command)
	}
	for _, flag := range []string{"-addr", "-tls-cert", "-tls-key", "-console-secure-cookies"} {
		require.Contains(t, top.Stdout, flag, "server -h lists the serve flags")
	}
	for _, args := range [][]string{{"--help"}, {"-help"}, {"help"}, {"help", "help"}} {
		res := proctest.Run(t, env, server, args...)
		require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Equal(t, top.Stdout, res.Stdout, "%v prints what -h prints", args)
	}

	actions := map[string][]string{
		"migrate":    {"up", "down", "status"},
		"tenants":    {"create", "list", "disable", "enable"},
		"tokens":     {"create", "list", "revoke"},
		"operators":  {"add", "list", "revoke"},
		"connectors": {"put", "list", "delete"},
		"sagas":      {"list", "show", "resolve", "define", "definitions"},
		"runs":       {"show", "cancel"},
		"events":     {"tail"},
	}
	for command, actions := range actions {
		for _, args := range [][]string{{command, "-h"}, {command, "--help"}, {"help", command}} {
			res := proctest.Run(t, env, server, args...)
			require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
			require.Empty(t, res.Stderr, "%v", args)
			for _, action := range actions {
				require.Contains(t, res.Stdout, "server "+command+" "+action, "%v lists %s", args, action)
			}
		}
		for _, action := range actions {
			for _, args := range [][]string{{command, action, "-h"}, {command, action, "--help"}} {
				res := proctest.Run(t, env, server, args...)
				require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
				require.Empty(t, res.Stderr, "%v", args)
				require.Contains(t, res.Stdout, "usage: server "+command+" "+action, "%v", args)
				require.Contains(t, res.Stdout, "-database-url", "%v lists the flags", args)
			}
		}
	}
	for _, args := range [][]string{{"mcp", "-h"}, {"help", "mcp"}} {
		res := proctest.Run(t, env, server, args...)
		require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Contains(t, res.Stdout, "usage: server mcp -token T", "%v", args)
		require.Contains(t, res.Stdout, "-four-eyes", "%v lists the flags", args)
	}
	res := proctest.Run(t, env, server, "tenants", "create", "acme", "-h") // after an ID too
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "-name")
}

// TestCommandMistakes: an unknown command names the known ones; flags before a command say where
// they belong; a wrong flag names the help to read. Each exits 2 with nothing on stdout.
func TestCommandMistakes(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"bogus"}, []string{`unknown command "bogus"`, "migrate, tenants, tokens, operators, effects, connectors, sagas, runs, events, schedules, retention, mcp, version, healthcheck, help", "server -h"}},
		{[]string{"help", "bogus"}, []string{`unknown command "bogus"`}},
		{[]string{"-database-url", "postgres://x/y", "migrate", "up"}, []string{`-database-url given before "migrate"`, "server migrate up -database-url"}},
		{[]string{"-log-format", "json", "-database-url", "postgres://x/y", "tokens", "list"}, []string{`-database-url, -log-format given before "tokens"`}},
		{[]string{"-addr", "127.0.0.1:0", "serve-please"}, []string{`unknown command "serve-please"`}},
		{[]string{"migrate", "up", "-bogus"}, []string{"flag provided but not defined: -bogus", "server migrate up -h"}},
		{[]string{"-bogus"}, []string{"flag provided but not defined: -bogus", "server -h"}},
		{[]string{"sagas"}, []string{"server sagas define", "server sagas list", "server sagas definitions"}},
		{[]string{"runs"}, []string{"server runs show", "server runs cancel"}},
	} {
		res := proctest.Run(t, env, server, tc.args...)
		require.Equal(t, 2, res.ExitCode, "%v: %s", tc.args, res.Stderr)
		require.Empty(t, res.Stdout, "%v", tc.args)
		for _, want := range tc.want {
			require.Contains(t, res.Stderr, want, "%v", tc.args)
		}
		require.Equal(t, 1, strings.Count(res.Stderr, "server:"), "%v: one message, no usage dump: %s", tc.args, res.Stderr)
	}
}
