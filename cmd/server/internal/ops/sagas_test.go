package ops_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/saga"
)

// TestSagasListedWithinScope: sagas of two tenants are listed newest first across pages of a
// cursor, each once with its steps; a scope sees only its tenants' (a tenant outside it, or an
// empty scope, lists nothing), and the state and name filters apply.
func TestSagasListedWithinScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	var started []uuid.UUID // oldest first
	for _, tenant := range []string{"acme", "globex", "acme", "globex", "acme"} {
		s, err := e.sagas.Start(ctx, "pay", map[string]int{"amount": 1}, &saga.StartOpts{TenantID: tenant})
		require.NoError(t, err)
		started = append(started, s.ID)
	}

	var listed []uuid.UUID
	after := ""
	for page := 0; ; page++ {
		require.Less(t, page, 5, "the cursor must end the listing")
		sagas, next, err := e.ops.Sagas(ctx, ops.SagaFilter{Scope: allTenants, Limit: 2, After: after})
		require.NoError(t, err)
		require.LessOrEqual(t, len(sagas), 2)
		for _, s := range sagas {
			require.Len(t, s.Steps, 1, "steps come with the saga")
			listed = append(listed, s.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, []uuid.UUID{started[4], started[3], started[2], started[1], started[0]}, listed, "newest first, each once")

	acme, next, err := e.ops.Sagas(ctx, ops.SagaFilter{Scope: acmeOnly})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, acme, 3)
	for _, s := range acme {
		require.Equal(t, "acme", s.TenantID)
	}
	for _, f := range []ops.SagaFilter{{Scope: acmeOnly, Tenant: "globex"}, {Scope: noTenant}, {Scope: allTenants, Name: "nope"}} {
		none, _, err := e.ops.Sagas(ctx, f)
		require.NoError(t, err)
		require.Empty(t, none, "%+v", f)
	}
	globex, _, err := e.ops.Sagas(ctx, ops.SagaFilter{Scope: allTenants, Tenant: "globex", Name: "pay"})
	require.NoError(t, err)
	require.Len(t, globex, 2)

	e.exec(t, `UPDATE reckon_sagas SET state = 'STUCK' WHERE id = $1`, started[1])
	stuck, _, err := e.ops.Sagas(ctx, ops.SagaFilter{Scope: allTenants, State: saga.StateStuck})
	require.NoError(t, err)
	require.Len(t, stuck, 1)
	require.Equal(t, started[1], stuck[0].ID)
}

// TestParseSagaFilter: the query-string names, and a *FieldError naming the field for each bad
// value.
func TestParseSagaFilter(t *testing.T) {
	t.Parallel()
	f, err := ops.ParseSagaFilter(url.Values{"tenant": {"acme"}, "state": {"stuck"}, "name": {"pay"}, "limit": {"10"}})
	require.NoError(t, err)
	require.Equal(t, ops.SagaFilter{Tenant: "acme", State: saga.StateStuck, Name: "pay", Limit: 10}, f)
	f, err = ops.ParseSagaFilter(url.Values{})
	require.NoError(t, err)
	require.Equal(t, ops.DefaultLimit, f.Limit)

	for _, tc := range []struct {
		values url.Values
		field  string
	}{
		{url.Values{"state": {"LOST"}}, "state"},
		{url.Values{"limit": {"0"}}, "limit"},
		{url.Values{"limit": {"501"}}, "limit"},
		{url.Values{"limit": {"ten"}}, "limit"},
		{url.Values{"tenant": {"no such tenant!"}}, "tenant"},
		{url.Values{"name": {"a\x00b"}}, "name"},
		{url.Values{"name": {"\xff"}}, "name"},
		{url.Values{"after": {"not-a-cursor"}}, "after"},
		{url.Values{"sort": {"name"}}, "sort"},
		{url.Values{"name": {"a", "b"}}, "name"},
	} {
		_, err := ops.ParseSagaFilter(tc.values)
		var fe *ops.FieldError
		require.ErrorAs(t, err, &fe, "%v", tc.values)
		require.Equal(t, tc.field, fe.Field, "%v: %v", tc.values, err)
	}
}

// TestSagaDetailAndResolve: a saga STUCK on its compensation shows its steps, history and
// compensation order; another scope, a bad decision or reason are refused with nothing changed;
// the operator's decision is recorded with its actor and the saga finishes.
func TestSagaDetailAndResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	s, err := e.sagas.Start(ctx, "pay", nil, &saga.StartOpts{TenantID: "globex"})
	require.NoError(t, err)
	e.exec(t, `UPDATE reckon_saga_steps SET state = 'COMPENSATION_STUCK' WHERE saga_id = $1`, s.ID)
	e.exec(t, `UPDATE reckon_sagas SET state = 'STUCK', stuck_reason = 'compensation kept failing' WHERE id = $1`, s.ID)

	_, err = e.ops.Saga(ctx, acmeOnly, s.ID)
	require.ErrorIs(t, err, ops.ErrNotFound, "another tenant's saga is not found")
	_, err = e.ops.Saga(ctx, allTenants, uuid.New())
	require.ErrorIs(t, err, ops.ErrNotFound)

	detail, err := e.ops.Saga(ctx, allTenants, s.ID)
	require.NoError(t, err)
	require.Equal(t, saga.StateStuck, detail.Saga.State)
	require.Equal(t, []int{0}, detail.CompensationOrder)
	require.Len(t, detail.History, 1)
	require.Equal(t, saga.StateRunning, detail.History[0].To)

	for _, tc := range []struct {
		scope         ops.Scope
		decision      saga.Decision
		actor, reason string
		field         string
		notFound      bool
	}{
		{scope: acmeOnly, decision: saga.MarkCompensated, actor: "cli:ann", reason: "done by hand", notFound: true},
		{scope: allTenants, decision: "undo", actor: "cli:ann", reason: "done by hand", field: "decision"},
		{scope: allTenants, decision: saga.MarkCompensated, actor: "cli:ann", reason: "", field: "reason"},
		{scope: allTenants, decision: saga.MarkCompensated, actor: "cli:ann", reason: "bad\x00", field: "reason"},
		{scope: allTenants, decision: saga.MarkCompensated, actor: "", reason: "done by hand", field: "actor"},
	} {
		_, err := e.ops.ResolveSaga(ctx, tc.scope, s.ID, tc.decision, tc.actor, tc.reason)
		if tc.notFound {
			require.ErrorIs(t, err, ops.ErrNotFound)
		} else {
			var fe *ops.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tc.field, fe.Field)
		}
		unchanged, err := e.sagas.Get(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, saga.StateStuck, unchanged.State)
	}

	resolved, err := e.ops.ResolveSaga(ctx, allTenants, s.ID, saga.MarkCompensated, "cli:ann", "refunded at the bank by hand")
	require.NoError(t, err)
	require.Equal(t, saga.StateCompensated, resolved.State)
	history, err := e.sagas.History(ctx, s.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, saga.StateCompensated, last.To)
	require.Equal(t, "operator:cli:ann", last.Actor)

	_, err = e.ops.ResolveSaga(ctx, allTenants, s.ID, saga.MarkCompensated, "cli:ann", "again")
	require.ErrorIs(t, err, saga.ErrNotStuck)
}
