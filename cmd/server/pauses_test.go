package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestConnectorPauseCLI drives `server connectors pause|resume|pauses` through the real binary:
// pause stores the pause effects.Client reads, with the OS user as its actor; a second pause keeps
// the first; bad arguments exit 2 naming the flag and store nothing; an unknown connector exits 1;
// pauses prints a table or JSON; resume of a tenant's pause leaves the others, and of none exits 1.
func TestConnectorPauseCLI(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	ctx := context.Background()
	client := testkit.NewClient(t, pool, &effects.Config{Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	run := cliCommand(t, env, server, "connectors")
	run(0, "put", "-name", "bank.api", "-dispatch-url", "http://127.0.0.1:9/dispatch", "-tags", "idempotent")

	res := run(0, "pauses")
	require.Contains(t, res.Stdout, "no connector is paused")
	res = run(0, "pause", "bank.api", "-reason", "bank maintenance 02:00-04:00")
	require.Contains(t, res.Stdout, "connector bank.api paused for every tenant")
	res = run(0, "pause", "bank.api", "-tenant", "acme", "-reason", "acme under review")
	require.Contains(t, res.Stdout, "connector bank.api paused for tenant acme")
	res = run(0, "pause", "bank.api", "-reason", "again")
	require.Contains(t, res.Stdout, "was paused already for every tenant by "+cliActor())
	require.Contains(t, res.Stdout, "bank maintenance 02:00-04:00")

	pauses, err := client.ConnectorPauses(ctx)
	require.NoError(t, err)
	require.Len(t, pauses, 2)
	require.Equal(t, cliActor(), pauses[0].PausedBy)
	require.Equal(t, "bank maintenance 02:00-04:00", pauses[0].Reason)

	// Bad arguments: exit 2 naming the flag (or NAME), nothing changed.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "bank.api"}, "-reason: required"},
		{[]string{"pause", "bank.api", "-reason", " "}, "-reason: required"},
		{[]string{"pause", "-reason", "r"}, "needs a connector NAME"},
		{[]string{"pause", "bank.api", "-tenant", "a b", "-reason", "r"}, "-tenant:"},
		{[]string{"resume", "bank.api", "-reason", "bad \xff"}, "-reason:"},
		{[]string{"pauses", "bank.api"}, "takes no NAME"},
		{[]string{"pauses", "-o", "yaml"}, "-o"},
	} {
		res := run(2, tc.args...)
		require.Contains(t, res.Stderr, tc.want, "%q", tc.args)
	}
	res = run(1, "pause", "nowhere.api", "-reason", "r")
	require.Contains(t, res.Stderr, "no connector nowhere.api")

	res = run(0, "pauses")
	require.Regexp(t, `(?m)^CONNECTOR\s+TENANT\s+PAUSED BY\s+SINCE\s+REASON$`, res.Stdout)
	require.Regexp(t, `(?m)^bank\.api\s+\(every tenant\)\s+\S+\s+\S+\s+bank maintenance 02:00-04:00$`, res.Stdout)
	res = run(0, "pauses", "-o", "json")
	var listed struct {
		Pauses []effects.ConnectorPause `json:"pauses"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &listed), res.Stdout)
	require.Len(t, listed.Pauses, 2)
	require.Equal(t, "acme", listed.Pauses[1].TenantID)

	res = run(0, "resume", "bank.api", "-reason", "maintenance over")
	require.Contains(t, res.Stdout, "connector bank.api resumed for every tenant")
	res = run(1, "resume", "bank.api", "-reason", "twice")
	require.Contains(t, res.Stderr, "connector bank.api is not paused for every tenant")
	run(0, "resume", "bank.api", "-tenant", "acme", "-reason", "review done")
	pauses, err = client.ConnectorPauses(ctx)
	require.NoError(t, err)
	require.Empty(t, pauses)
	require.Equal(t, 4, testkit.Count(t, pool, `SELECT count(*) FROM reckon_connector_pause_log WHERE actor = $1`, cliActor()))
}
