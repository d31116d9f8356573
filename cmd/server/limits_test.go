package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestConnectorLimitCLI drives `server connectors limit show|set|clear|reset` through the real
// binary: set stores the operator's limit that effects.Client reads, with the defaults filled in
// and the OS user as its actor; bad arguments exit 2 naming the flag and store nothing; show
// prints a table or the API's JSON; reset ends a pause; clear removes the limit, and a second clear
// is an error.
func TestConnectorLimitCLI(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	ctx := context.Background()
	client := testkit.NewClient(t, pool, &effects.Config{Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	run := cliCommand(t, env, server, "connectors", "limit")
	showJSON := func() api.ConnectorLimitJSON {
		t.Helper()
		var out api.ConnectorLimitJSON
		res := run(0, "show", "bank.wire", "-o", "json")
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &out), res.Stdout)
		return out
	}

	res := run(0, "show")
	require.Contains(t, res.Stdout, "no operator's limits")
	res = run(0, "show", "bank.wire")
	require.Contains(t, res.Stdout, "connector bank.wire has no operator's limit: its own applies")

	res = run(0, "set", "bank.wire", "-rate", "20", "-max-in-flight", "5", "-break-after", "5", "-reason", "bank slow: INC-42")
	require.Contains(t, res.Stdout, "connector bank.wire limited: 20/1s burst 20, 5 in flight, breaks after 5 for 30s")
	settings, err := client.LimitSettings(ctx)
	require.NoError(t, err)
	require.Len(t, settings, 1)
	require.Equal(t, effects.Limit{Rate: 20, Per: time.Second, Burst: 20, MaxInFlight: 5, BreakAfter: 5, BreakFor: 30 * time.Second}, settings[0].Limit)
	require.Equal(t, cliActor(), settings[0].SetBy)
	require.Equal(t, "bank slow: INC-42", settings[0].Reason)

	// Bad arguments: exit 2 naming the flag (or NAME), nothing changed.
	for _, tc := range limitCLIMistakes {
		res := run(2, tc.args...)
		require.Contains(t, res.Stderr, tc.want, "%q", tc.args)
	}
	after, err := client.LimitSettings(ctx)
	require.NoError(t, err)
	require.Equal(t, settings, after, "nothing changed")

	// Replaced; shown as a table and as the API's JSON.
	run(0, "set", "bank.wire", "-rate", "3", "-per", "1m", "-burst", "1", "-per-tenant", "-break-after", "2", "-break-for", "5s")
	res = run(0, "show")
	require.Contains(t, res.Stdout, "3/1m0s burst 1, breaks after 2 for 5s, per tenant")
	one := showJSON()
	require.NotNil(t, one.Limit)
	require.Equal(t, api.LimitFields{Rate: 3, PerMS: 60000, Burst: 1, PerTenant: true, BreakAfter: 2, BreakForMS: 5000}, one.Limit.LimitFields)
	require.Empty(t, one.States)

	// Reset ends a pause set by an upstream's Retry-After.
	_, err = pool.Exec(ctx, `SELECT reckon_limit_release('bank.wire', '', gen_random_uuid(), false, 0, 30000, true, 30000)`)
	require.NoError(t, err)
	one = showJSON()
	require.Len(t, one.States, 1)
	require.NotNil(t, one.States[0].PausedUntil, "paused")
	res = run(0, "show", "bank.wire")
	require.Contains(t, res.Stdout, "(shared)")
	require.Contains(t, res.Stdout, one.States[0].PausedUntil.UTC().Format("2006-01-02T15:04:05"))
	res = run(0, "reset", "bank.wire")
	require.Contains(t, res.Stdout, "connector bank.wire: circuits closed and pauses ended")
	one = showJSON()
	require.Len(t, one.States, 1)
	require.Nil(t, one.States[0].PausedUntil, "no longer paused")
	res = run(0, "reset", "bank.wire")
	require.Contains(t, res.Stdout, "nothing was paused, open or counting failures")

	res = run(0, "clear", "bank.wire")
	require.Contains(t, res.Stdout, "connector bank.wire: operator's limit cleared")
	settings, err = client.LimitSettings(ctx)
	require.NoError(t, err)
	require.Empty(t, settings)
	res = run(1, "clear", "bank.wire")
	require.Contains(t, res.Stderr, "no operator's limit for connector bank.wire")
	res = run(0, "show", "bank.wire")
	require.Contains(t, res.Stdout, "has no operator's limit")
}

// limitCLIMistakes are bad arguments of `server connectors limit`, each with what the message must
// say (the flag or NAME it names).
var limitCLIMistakes = []struct {
	args []string
	want string
}{
	{[]string{"set", "bank.wire", "-rate", "-1"}, "-rate: "},
	{[]string{"set", "bank.wire", "-rate", "1000001"}, "-rate: "},
	{[]string{"set", "bank.wire", "-rate", "x"}, "invalid value \"x\" for flag -rate"},
	{[]string{"set", "bank.wire", "-per", "2h"}, "-per: "},
	{[]string{"set", "bank.wire", "-per", "-1s"}, "-per: "},
	{[]string{"set", "bank.wire", "-burst", "-3"}, "-burst: "},
	{[]string{"set", "bank.wire", "-max-in-flight", "2000000"}, "-max-in-flight: "},
	{[]string{"set", "bank.wire", "-break-after", "-1"}, "-break-after: "},
	{[]string{"set", "bank.wire", "-break-for", "500ms"}, "-break-for: "},
	{[]string{"set", "bank.wire", "-reason", strings.Repeat("r", 2001)}, "-reason: limited to 2000 bytes"},
	{[]string{"set", "bank.wire", "-reason", "caf\xe9"}, "-reason: not valid UTF-8"},
	{[]string{"set", strings.Repeat("n", 201), "-rate", "1"}, "NAME: must be 1 to 200 bytes"},
	{[]string{"set", "-rate", "1"}, "needs a connector NAME"},
	{[]string{"clear"}, "needs a connector NAME"},
	{[]string{"reset"}, "needs a connector NAME"},
	{[]string{"reset", "a\xffb"}, "NAME: not valid UTF-8"},
	{[]string{"set", "bank.wire", "extra"}, "unexpected argument \"extra\""},
	{[]string{"show", "-o", "yaml"}, "-o \"yaml\": want table or json"},
	{[]string{"frob", "bank.wire"}, "unknown connectors limit action \"frob\""},
}
