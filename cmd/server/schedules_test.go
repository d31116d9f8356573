package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestSchedulesCLI drives `server schedules set|list|delete` through the real binary: set creates
// and replaces a schedule of a stored connector, by the OS user; bad arguments exit 2 naming the
// flag and store nothing; list prints a table or the API's JSON; delete deletes, and a second
// delete is an error.
func TestSchedulesCLI(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	_, _, err := httpconn.Put(context.Background(), pool, httpconn.Definition{
		Name: "report.run", Tags: []effects.Tag{effects.TagIdempotent}, DispatchURL: "http://127.0.0.1:1/reports",
	})
	require.NoError(t, err)
	run := cliCommand(t, env, server, "schedules")
	count := func() int { return testkit.Count(t, pool, `SELECT count(*) FROM reckon_schedules`) }

	require.Contains(t, run(0, "list").Stdout, "no schedules")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "nightly", "-connector", "report.run", "-cron", "@daily"}, "-tenant is required"},
		{[]string{"set", "-tenant", "acme", "nightly", "-connector", "nope", "-cron", "@daily"}, "-connector:"},
		{[]string{"set", "-tenant", "acme", "nightly", "-connector", "report.run", "-cron", "0 0 * *"}, "-cron:"},
		{[]string{"set", "-tenant", "acme", "nightly", "-connector", "report.run", "-every", "500ms"}, "-every:"},
		{[]string{"set", "-tenant", "acme", "nightly", "-connector", "report.run", "-cron", "@daily", "-missed", "never"}, "-missed:"},
		{[]string{"set", "-tenant", "acme", "bad/name", "-connector", "report.run", "-cron", "@daily"}, "NAME:"},
		{[]string{"set", "-tenant", "acme", "nightly", "-connector", "report.run", "-cron", "@daily", "-args", "{"}, "-args:"},
		{[]string{"set", "-tenant", "acme"}, "needs an ID"},
		{[]string{"pause", "-tenant", "acme", "nightly"}, "unknown schedules action"},
	} {
		res := run(2, tc.args...)
		require.Contains(t, res.Stderr, tc.want, "%q", tc.args)
	}
	require.Equal(t, 0, count(), "a refused set stores nothing")

	res := run(0, "set", "-tenant", "acme", "nightly", "-connector", "report.run", "-cron", "0 2 * * *", "-args", `{"kind":"settlement"}`)
	require.Contains(t, res.Stdout, "schedule acme/nightly created: 0 2 * * *, next tick")
	res = run(0, "set", "-tenant", "acme", "nightly", "-connector", "report.run", "-every", "1h", "-missed", "catch_up", "-o", "json")
	var replaced struct {
		IntervalSeconds int64  `json:"interval_seconds"`
		Missed          string `json:"missed"`
		CreatedBy       string `json:"created_by"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &replaced), res.Stdout)
	require.EqualValues(t, 3600, replaced.IntervalSeconds)
	require.Equal(t, "catch_up", replaced.Missed)
	require.Equal(t, "cli:"+cliActor(), replaced.CreatedBy)

	res = run(0, "list")
	require.Contains(t, res.Stdout, "TENANT")
	require.Contains(t, res.Stdout, "every 1h0m0s")
	var listed []struct{ Tenant, Name string }
	require.NoError(t, json.Unmarshal([]byte(run(0, "list", "-tenant", "acme", "-o", "json").Stdout), &listed))
	require.Equal(t, []struct{ Tenant, Name string }{{"acme", "nightly"}}, listed)

	require.Contains(t, run(0, "delete", "-tenant", "acme", "nightly").Stdout, "schedule acme/nightly deleted")
	require.Contains(t, run(1, "delete", "-tenant", "acme", "nightly").Stderr, "tenant acme has no schedule nightly")
	require.Equal(t, 0, count())
}
