package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

// enqueueRun enqueues n effects of tenant into run.
func (e *harness) enqueueRun(t *testing.T, tenant, run string, n int) []*effects.Effect {
	t.Helper()
	var out []*effects.Effect
	for i := range n {
		eff, err := e.effects.Enqueue(context.Background(), effects.Spec{
			TenantID: tenant, Connector: connWrite, RunID: run, IdempotencyKey: fmt.Sprintf("%s-%d", run, i),
			Args: json.RawMessage(`{}`),
		}, nil)
		require.NoError(t, err)
		out = append(out, eff)
	}
	return out
}

// TestRunsWithinScope: runs of two tenants (one run id in both) listed newest first across pages,
// each with its status; a scope sees only its tenants' runs, and another tenant's run of the same
// id is not found; a run's detail has its guardrails, counts and the effects awaiting a callback
// with their deadlines.
func TestRunsWithinScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	_, err := e.effects.StartRun(ctx, effects.RunSpec{ID: "run-1", TenantID: "acme", MaxSteps: 5, MaxConsecutiveFailures: 2})
	require.NoError(t, err)
	acmeEffects := e.enqueueRun(t, "acme", "run-1", 2)
	e.enqueueRun(t, "globex", "run-1", 1)
	e.enqueueRun(t, "acme", "run-2", 1)

	type runKey struct{ tenant, id string }
	var listed []runKey
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 4)
		runs, next, err := e.ops.Runs(ctx, ops.RunFilter{Scope: allTenants, Limit: 2, After: after})
		require.NoError(t, err)
		for _, r := range runs {
			listed = append(listed, runKey{r.TenantID, r.ID})
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, []runKey{{"acme", "run-2"}, {"globex", "run-1"}, {"acme", "run-1"}}, listed)

	// Each listed run carries its effects per state (the console's runs list shows them), STUCK
	// ones included.
	e.exec(t, `UPDATE reckon_effects SET state = 'UNKNOWN', transition_actor = 'test', transition_reason = 'timeout' WHERE id = $1`, acmeEffects[0].ID)
	e.exec(t, `UPDATE reckon_effects SET state = 'STUCK', transition_actor = 'test', transition_reason = 'no answer' WHERE id = $1`, acmeEffects[0].ID)
	counts := map[runKey]map[effects.State]int{}
	runs, _, err := e.ops.Runs(ctx, ops.RunFilter{Scope: allTenants})
	require.NoError(t, err)
	for _, r := range runs {
		counts[runKey{r.TenantID, r.ID}] = r.Effects
	}
	require.Equal(t, map[effects.State]int{effects.StatePending: 1, effects.StateStuck: 1}, counts[runKey{"acme", "run-1"}])
	require.Equal(t, map[effects.State]int{effects.StatePending: 1}, counts[runKey{"globex", "run-1"}])

	acme, _, err := e.ops.Runs(ctx, ops.RunFilter{Scope: acmeOnly})
	require.NoError(t, err)
	require.Len(t, acme, 2)
	for _, r := range acme {
		require.Equal(t, "acme", r.TenantID)
	}
	none, _, err := e.ops.Runs(ctx, ops.RunFilter{Scope: acmeOnly, Tenant: "globex"})
	require.NoError(t, err)
	require.Empty(t, none)
	_, _, err = e.ops.Runs(ctx, ops.RunFilter{Scope: allTenants, Limit: 501})
	var fe *ops.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "limit", fe.Field)

	_, err = e.ops.Run(ctx, acmeOnly, "globex", "run-1")
	require.ErrorIs(t, err, ops.ErrNotFound, "another tenant's run of the same id")
	_, err = e.ops.Run(ctx, allTenants, "acme", "run-9")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = e.ops.Run(ctx, allTenants, "", "run-1")
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "tenant", fe.Field)

	deadline := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	e.exec(t, `UPDATE reckon_effects SET correlation_id = 'run-1:' || id, deadline_at = $2 WHERE id = $1`, acmeEffects[1].ID, deadline)
	detail, err := e.ops.Run(ctx, acmeOnly, "acme", "run-1")
	require.NoError(t, err)
	require.Equal(t, 5, detail.Run.MaxSteps)
	require.Equal(t, 2, detail.Run.MaxConsecutiveFailures)
	require.Equal(t, 2, detail.Run.Steps)
	require.Equal(t, 1, detail.Run.Effects[effects.StatePending]) // and the STUCK one
	require.Len(t, detail.Awaiting, 1)
	require.Equal(t, acmeEffects[1].ID, detail.Awaiting[0].ID)
	require.NotNil(t, detail.Awaiting[0].DeadlineAt)
	require.True(t, deadline.Equal(*detail.Awaiting[0].DeadlineAt))
}

// TestCancelRun: a cancellation out of scope or without a reason changes nothing; one in scope
// cancels the tenant's run only, fails its unstarted effect and records the actor.
func TestCancelRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	acme := e.enqueueRun(t, "acme", "run-1", 1)
	globex := e.enqueueRun(t, "globex", "run-1", 1)

	_, err := e.ops.CancelRun(ctx, acmeOnly, "globex", "run-1", "cli:ann", "stop")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = e.ops.CancelRun(ctx, allTenants, "acme", "run-1", "cli:ann", " ")
	var fe *ops.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "reason", fe.Field)
	_, err = e.ops.CancelRun(ctx, allTenants, "acme", "run-1", "cli:ann", string(make([]byte, 1001)))
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "reason", fe.Field)
	for _, tenant := range []string{"acme", "globex"} {
		run, err := e.effects.GetRun(ctx, "run-1", &effects.RunOpts{TenantID: tenant})
		require.NoError(t, err)
		require.Nil(t, run.CancelledAt, "nothing changed for %s", tenant)
	}

	res, err := e.ops.CancelRun(ctx, acmeOnly, "acme", "run-1", "cli:ann", "agent looping")
	require.NoError(t, err)
	require.NotNil(t, res.Run.CancelledAt)
	require.Equal(t, "caller:cli:ann", res.Run.CancelledBy)
	require.Equal(t, "agent looping", res.Run.CancelReason)
	require.Equal(t, []any{acme[0].ID}, []any{res.Failed[0]})
	got, err := e.effects.Get(ctx, acme[0].ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, got.State)
	history, err := e.effects.History(ctx, acme[0].ID)
	require.NoError(t, err)
	require.Equal(t, "caller:cli:ann", history[len(history)-1].Actor)

	other, err := e.effects.Get(ctx, globex[0].ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, other.State, "globex's run of the same id is untouched")
}
