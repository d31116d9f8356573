package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestRunsCLI drives `server runs show|cancel` through the binary: a run's guardrails, counts and
// the events it awaits with their deadlines, as a table and JSON, another tenant's run of the same
// id apart; a cancellation recorded with the OS user's actor or -actor that fails the run's
// unstarted effects and leaves the other tenant's run alone; bad flags exit 2 naming the flag
// with nothing changed, an unknown run exits 1.
func TestRunsCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := proctest.Binary(t, "server")
	f := newOpsFixture(t)
	_, err := f.effects.StartRun(ctx, effects.RunSpec{ID: "run-1", TenantID: "acme", MaxSteps: 10})
	require.NoError(t, err)
	var acme []*effects.Effect
	for _, key := range []string{"w-1", "w-2"} {
		// w-2 with its job at once (ScheduledAt): with the correlation id below it stands for an
		// effect whose dispatch was accepted and that awaits its callback.
		var opts *effects.EnqueueOpts
		if key == "w-2" {
			opts = &effects.EnqueueOpts{ScheduledAt: time.Now()}
		}
		e, err := f.effects.Enqueue(ctx, effects.Spec{TenantID: "acme", Connector: "bank.wire", IdempotencyKey: key, RunID: "run-1", Args: json.RawMessage(`{}`)}, opts)
		require.NoError(t, err)
		acme = append(acme, e)
	}
	globex, err := f.effects.Enqueue(ctx, effects.Spec{TenantID: "globex", Connector: "bank.wire", IdempotencyKey: "w-1", RunID: "run-1", Args: json.RawMessage(`{}`)}, nil)
	require.NoError(t, err)
	deadline := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_effects SET correlation_id = 'run-1:' || id, deadline_at = $2 WHERE id = $1`, acme[1].ID, deadline)
	require.NoError(t, err)

	res := proctest.Run(t, f.env, server, "runs", "show", "-tenant", "acme", "run-1")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "run run-1 of tenant acme")
	require.Contains(t, res.Stdout, "guardrails: max steps 10, max consecutive failures none")
	require.Contains(t, res.Stdout, "steps 2, failures 0, consecutive failures 0")
	require.Contains(t, res.Stdout, "accepting effects")
	require.Contains(t, res.Stdout, "effects: PENDING 2")
	require.Regexp(t, acme[1].ID.String()+`\s+bank.wire\s+run-1:`+acme[1].ID.String()+`\s+2031-01-02T03:04:05Z`, res.Stdout)

	res = proctest.Run(t, f.env, server, "runs", "show", "run-1", "-tenant", "globex", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var detail struct {
		Run struct {
			ID       string         `json:"id"`
			TenantID string         `json:"tenant_id"`
			MaxSteps int            `json:"max_steps"`
			Effects  map[string]int `json:"effects"`
			Settled  bool           `json:"settled"`
		} `json:"run"`
		Awaiting []struct{ ID string } `json:"awaiting"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &detail), res.Stdout)
	require.Equal(t, "globex", detail.Run.TenantID)
	require.Equal(t, 0, detail.Run.MaxSteps, "acme's guardrails are acme's run's")
	require.Equal(t, map[string]int{"PENDING": 1}, detail.Run.Effects)
	require.False(t, detail.Run.Settled, "the API's shape: a PENDING effect keeps the run unsettled")
	require.Empty(t, detail.Awaiting)

	for _, tc := range runsCLIMistakes {
		res := proctest.Run(t, f.env, server, append([]string{"runs"}, tc.args...)...)
		require.Equal(t, 2, res.ExitCode, "%v: %s", tc.args, res.Stderr)
		require.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}
	run, err := f.effects.GetRun(ctx, "run-1", &effects.RunOpts{TenantID: "acme"})
	require.NoError(t, err)
	require.Nil(t, run.CancelledAt, "nothing changed")

	res = proctest.Run(t, f.env, server, "runs", "show", "-tenant", "acme", "run-9")
	require.Equal(t, 1, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, `tenant acme has no run "run-9"`)

	res = proctest.Run(t, f.env, server, "runs", "cancel", "-tenant", "acme", "run-1", "-reason", "agent looping")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "run run-1 of tenant acme cancelled by caller:"+cliActor()+": 1 effect(s) FAILED, 1 awaiting a callback cancelled")
	e, err := f.effects.Get(ctx, acme[0].ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, e.State)
	history, err := f.effects.History(ctx, acme[0].ID)
	require.NoError(t, err)
	require.Equal(t, "caller:"+cliActor(), history[len(history)-1].Actor)
	require.Contains(t, history[len(history)-1].Reason, "agent looping")
	e, err = f.effects.Get(ctx, globex.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, e.State, "globex's run-1 is another run")

	res = proctest.Run(t, f.env, server, "runs", "cancel", "-tenant", "globex", "run-1", "-reason", "tidy up", "-actor", "ann@example.com", "-o", "json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var cancellation struct {
		Run struct {
			CancelledBy string `json:"cancelled_by"`
		} `json:"run"`
		Failed []string `json:"failed"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &cancellation), res.Stdout)
	require.Equal(t, "caller:ann@example.com", cancellation.Run.CancelledBy)
	require.Equal(t, []string{globex.ID.String()}, cancellation.Failed)
}

// runsCLIMistakes are bad arguments of `server runs`, each with what the message must say (the
// flag or the run it names).
var runsCLIMistakes = []struct {
	args []string
	want string
}{
	{[]string{"show", "run-1"}, "-tenant"},
	{[]string{"show", "-tenant", "acme"}, "needs an ID"},
	{[]string{"show", "-tenant", "not a tenant", "run-1"}, "-tenant"},
	{[]string{"show", "-tenant", "acme", "run\xff"}, "run: not valid UTF-8"},
	{[]string{"show", "-tenant", "acme", strings.Repeat("r", 201)}, "run: at most 200 bytes"},
	{[]string{"show", "-tenant", "acme", "run-1", "-o", "yaml"}, "-o"},
	{[]string{"show", "-tenant", "acme", "run-1", "extra"}, `unexpected argument "extra"`},
	{[]string{"cancel", "-tenant", "acme", "run-1"}, "-reason"},
	{[]string{"cancel", "-tenant", "acme", "run-1", "-reason", "a\xffb"}, "-reason"},
	{[]string{"cancel", "-tenant", "acme", "run-1", "-reason", strings.Repeat("x", 1001)}, "-reason"},
	{[]string{"cancel", "-tenant", "acme", "run-1", "-reason", "loop", "-actor", strings.Repeat("a", 201)}, "-actor"},
	{[]string{"list"}, "unknown runs action"},
}
