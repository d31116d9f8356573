package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/events"
)

// TestEventSubscriptionsCLI drives `server events subscriptions create|list|pause|resume|delete`
// through the real binary: bad arguments exit 2 naming the flag; create prints the secret once.
func TestEventSubscriptionsCLI(t *testing.T) {
	t.Parallel()
	server, _, env := serverOnDB(t)
	run := cliCommand(t, env, server, "events", "subscriptions")

	res := run(2, "create", "-url", "ftp://example.com/")
	require.Contains(t, res.Stderr, "-url")
	res = run(2, "create", "-url", "https://example.com/", "-pattern", "Turn")
	require.Contains(t, res.Stderr, "-pattern")
	run(2, "pause", "not-a-uuid")

	res = run(0, "create", "-url", "https://example.com/hook", "-tenant", "acme", "-pattern", "turn.*", "-pattern", "tool.executed", "-o", "json")
	var sub events.Subscription
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &sub), res.Stdout)
	require.Equal(t, []string{"turn.*", "tool.executed"}, sub.Patterns)
	require.NotEmpty(t, sub.Secret)

	res = run(0, "list")
	require.Contains(t, res.Stdout, sub.ID.String())
	require.Contains(t, res.Stdout, "turn.*,tool.executed")
	res = run(0, "pause", sub.ID.String(), "-reason", "receiver migration")
	require.Contains(t, res.Stdout, "paused")
	res = run(0, "list", "-tenant", "acme", "-o", "json")
	var list []events.Subscription
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &list), res.Stdout)
	require.Len(t, list, 1)
	require.Equal(t, "receiver migration", list[0].PausedReason)
	res = run(0, "resume", sub.ID.String())
	require.Contains(t, res.Stdout, "active")
	run(0, "delete", sub.ID.String())
	run(1, "delete", sub.ID.String())
}
