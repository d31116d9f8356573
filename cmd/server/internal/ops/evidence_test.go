package ops_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

func TestEvidence(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	_, err := h.effects.StartRun(ctx, effects.RunSpec{ID: "run-1", TenantID: "acme", MaxSteps: 10})
	require.NoError(t, err)
	wire := h.insertEffect(t, "acme", connWire, "wire-1", effects.StateConfirmed, func(s *effects.Spec) { s.RunID = "run-1" })
	compensation, err := h.effects.Compensate(ctx, wire.ID, "test", "refund asked", nil)
	require.NoError(t, err)

	ev, err := h.ops.Evidence(ctx, ops.Scope{Tenants: []string{"acme"}}, wire.ID)
	require.NoError(t, err)
	require.Equal(t, wire.ID, ev.Effect.ID)
	require.Len(t, ev.History, 2)
	require.Equal(t, "test", ev.History[1].Actor)
	require.JSONEq(t, `{"upstream": "said so"}`, string(ev.History[1].Detail))
	require.Equal(t, []uuid.UUID{compensation.ID}, ids(ev.Compensations))
	require.Nil(t, ev.Compensates)
	require.NotNil(t, ev.Run)
	require.Equal(t, "run-1", ev.Run.ID)
	require.Nil(t, ev.Saga)
	require.Nil(t, ev.Turn)

	back, err := h.ops.Evidence(ctx, ops.Scope{}, compensation.ID)
	require.NoError(t, err)
	require.Equal(t, wire.ID, back.Compensates.ID)
	require.Empty(t, back.Compensations)

	_, err = h.ops.Evidence(ctx, ops.Scope{Tenants: []string{"globex"}}, wire.ID)
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = h.ops.Evidence(ctx, ops.Scope{}, uuid.New())
	require.ErrorIs(t, err, ops.ErrNotFound)
}

func TestStuckQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	var acme []uuid.UUID // acme's STUCK effects, longest stuck first
	for i := range 5 {
		tenant := []string{"acme", "globex"}[i%2]
		e := h.insertEffect(t, tenant, connWire, fmt.Sprintf("wire-%d", i), effects.StateStuck)
		// Stuck for 5-i hours: the first inserted is the longest stuck.
		h.exec(t, `UPDATE reckon_effects SET updated_at = now() - make_interval(hours => $2) WHERE id = $1`, e.ID, 5-i)
		if tenant == "acme" {
			acme = append(acme, e.ID)
		}
	}
	h.insertEffect(t, "acme", connWire, "pending", effects.StatePending)
	h.insertEffect(t, "acme", connWire, "unknown", effects.StateUnknown)

	scope := ops.Scope{Tenants: []string{"acme"}}
	var got []uuid.UUID
	after := ""
	for {
		page, total, next, err := h.ops.Stuck(ctx, scope, 2, after)
		require.NoError(t, err)
		require.Equal(t, 3, total)
		for _, ev := range page {
			require.Equal(t, effects.StateStuck, ev.Effect.State)
			require.Equal(t, "UNKNOWN>STUCK", string(ev.History[len(ev.History)-1].From)+">"+string(ev.History[len(ev.History)-1].To))
			got = append(got, ev.Effect.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, acme, got)

	page, total, next, err := h.ops.Stuck(ctx, ops.Scope{}, 0, "")
	require.NoError(t, err)
	require.Equal(t, 5, total)
	require.Len(t, page, 5)
	require.Empty(t, next)
	require.True(t, page[0].Effect.UpdatedAt.Before(page[4].Effect.UpdatedAt.Add(-3*time.Hour)))

	_, _, _, err = h.ops.Stuck(ctx, scope, 1000, "")
	require.ErrorAs(t, err, new(*ops.FieldError))
}

func TestOverview(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	old := h.insertEffect(t, "acme", connWire, "p-old", effects.StatePending)
	h.exec(t, `UPDATE reckon_effects SET created_at = now() - interval '3 hours' WHERE id = $1`, old.ID)
	h.insertEffect(t, "acme", connWire, "p-new", effects.StatePending)
	h.insertEffect(t, "acme", connMail, "u", effects.StateUnknown)
	h.insertEffect(t, "globex", connWire, "s", effects.StateStuck)
	h.insertEffect(t, "acme", connWire, "c1", effects.StateConfirmed)
	h.insertEffect(t, "acme", connWire, "c2", effects.StateConfirmed)
	h.insertEffect(t, "globex", connMail, "f", effects.StateFailed)
	settledLongAgo := h.insertEffect(t, "acme", connWire, "c-old", effects.StateConfirmed)
	h.exec(t, `UPDATE reckon_effects SET updated_at = now() - interval '25 hours' WHERE id = $1`, settledLongAgo.ID)
	earlier := h.insertEffect(t, "acme", connMail, "c-earlier", effects.StateConfirmed)
	h.exec(t, `UPDATE reckon_effects SET updated_at = date_trunc('minute', now()) - interval '30 minutes' WHERE id = $1`, earlier.ID)

	ov, err := h.ops.Overview(ctx, ops.Scope{})
	require.NoError(t, err)
	require.Equal(t, []ops.StateCount{
		{Tenant: "acme", Connector: connWire, State: effects.StateConfirmed, Count: 2},
		{Tenant: "acme", Connector: connWire, State: effects.StatePending, Count: 2},
		{Tenant: "acme", Connector: connMail, State: effects.StateConfirmed, Count: 1},
		{Tenant: "acme", Connector: connMail, State: effects.StateUnknown, Count: 1},
		{Tenant: "globex", Connector: connWire, State: effects.StateStuck, Count: 1},
		{Tenant: "globex", Connector: connMail, State: effects.StateFailed, Count: 1},
	}, ov.Counts)
	require.Equal(t, 1, ov.Stuck)
	require.NotNil(t, ov.OldestPending)
	require.WithinDuration(t, time.Now().Add(-3*time.Hour), *ov.OldestPending, time.Minute)
	require.NotNil(t, ov.OldestUnknown)
	require.Len(t, ov.SettledPerMinute, 60)
	for i, m := range ov.SettledPerMinute {
		require.Equal(t, time.Duration(0), m.Minute.Sub(ov.SettledPerMinute[0].Minute)-time.Duration(i)*time.Minute)
	}
	var confirmed, failed int64
	for _, m := range ov.SettledPerMinute {
		confirmed, failed = confirmed+m.Confirmed, failed+m.Failed
	}
	require.Equal(t, int64(3), confirmed) // c1, c2 and c-earlier (30 minutes ago); not c-old
	require.Equal(t, int64(1), failed)
	require.Equal(t, int64(1), ov.SettledPerMinute[29].Confirmed+ov.SettledPerMinute[30].Confirmed)

	scoped, err := h.ops.Overview(ctx, ops.Scope{Tenants: []string{"globex"}})
	require.NoError(t, err)
	require.Len(t, scoped.Counts, 2)
	require.Nil(t, scoped.OldestPending)
	require.Equal(t, 1, scoped.Stuck)
}

func TestBulkResolve(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	var wires []*effects.Effect
	for i := range 4 {
		wires = append(wires, h.insertEffect(t, "acme", connWire, fmt.Sprintf("wire-%d", i), effects.StateStuck))
	}
	mail := h.insertEffect(t, "acme", connMail, "mail", effects.StateStuck)
	other := h.insertEffect(t, "globex", connWire, "wire-g", effects.StateStuck)
	h.insertEffect(t, "acme", connWire, "wire-pending", effects.StatePending)
	scope := ops.Scope{Tenants: []string{"acme"}}

	preview, total, err := h.ops.PreviewResolve(ctx, ops.EffectFilter{Scope: scope, Connector: connWire}, 3)
	require.NoError(t, err)
	require.Equal(t, 4, total)
	var previewed []uuid.UUID
	for _, e := range preview { // whole effects, for the operator to see what they resolve
		require.Equal(t, "acme", e.TenantID)
		require.Equal(t, connWire, e.Connector)
		require.Equal(t, effects.StateStuck, e.State)
		require.NotEmpty(t, e.IdempotencyKey)
		previewed = append(previewed, e.ID)
	}
	require.Equal(t, []uuid.UUID{wires[3].ID, wires[2].ID, wires[1].ID}, previewed) // newest first, at most 3
	_, _, err = h.ops.PreviewResolve(ctx, ops.EffectFilter{State: effects.StatePending}, 3)
	require.ErrorAs(t, err, new(*ops.FieldError))
	before := countOperatorRows(t, h)
	require.Zero(t, before) // a preview changes nothing

	// Between preview and confirmation someone resolves one; an out-of-scope id is slipped in.
	_, err = h.ops.Resolve(ctx, scope, wires[2].ID, effects.StateConfirmed, "console:ann", "checked by hand")
	require.NoError(t, err)
	_, err = h.ops.ResolveMany(ctx, scope, previewed, "DONE", "cli:bob", "bank outage")
	require.ErrorAs(t, err, new(*ops.FieldError))
	result, err := h.ops.ResolveMany(ctx, scope, append(previewed, other.ID), effects.StateFailed, "cli:bob", "bank outage")
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{wires[3].ID, wires[1].ID}, result.Resolved)
	require.Equal(t, map[uuid.UUID]string{wires[2].ID: "not STUCK any more", other.ID: "not found"}, result.Skipped)
	for id, want := range map[uuid.UUID]effects.State{
		wires[0].ID: effects.StateStuck, wires[1].ID: effects.StateFailed, wires[2].ID: effects.StateConfirmed,
		wires[3].ID: effects.StateFailed, mail.ID: effects.StateStuck, other.ID: effects.StateStuck,
	} {
		e, err := h.effects.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, e.State)
	}
	require.Equal(t, 3, countOperatorRows(t, h))
}

func countOperatorRows(t *testing.T, h *harness) int {
	t.Helper()
	var n int
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT count(*) FROM reckon_effect_transitions WHERE actor LIKE 'operator:%'`).Scan(&n))
	return n
}

// A bulk redrive uses the bulk resolve's flow on FAILED effects: a preview (changing nothing),
// then a confirmation that redrives exactly the previewed effects still FAILED and in scope, and
// skips, saying why, the others — one redriven meanwhile, one its run refuses, one out of scope.
func TestBulkRedrive(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	var wires []*effects.Effect
	for i := range 3 {
		wires = append(wires, h.insertEffect(t, "acme", connWire, fmt.Sprintf("wire-%d", i), effects.StateFailed))
	}
	inRun := h.insertEffect(t, "acme", connWire, "wire-run", effects.StateFailed, func(s *effects.Spec) { s.RunID = "run-1" })
	h.insertEffect(t, "acme", connMail, "mail", effects.StateFailed)
	other := h.insertEffect(t, "globex", connWire, "wire-g", effects.StateFailed)
	h.insertEffect(t, "acme", connWire, "wire-stuck", effects.StateStuck)
	scope := ops.Scope{Tenants: []string{"acme"}}

	preview, total, err := h.ops.PreviewRedrive(ctx, ops.EffectFilter{Scope: scope, Connector: connWire}, 0)
	require.NoError(t, err)
	require.Equal(t, 4, total)
	require.Equal(t, []uuid.UUID{inRun.ID, wires[2].ID, wires[1].ID, wires[0].ID}, ids(preview)) // newest first
	_, total, err = h.ops.PreviewRedrive(ctx, ops.EffectFilter{Scope: scope, Connector: connWire}, 2)
	require.NoError(t, err)
	require.Greater(t, total, 2, "more than max match")
	_, _, err = h.ops.PreviewRedrive(ctx, ops.EffectFilter{State: effects.StateStuck}, 3)
	require.ErrorAs(t, err, new(*ops.FieldError))
	require.Zero(t, countOperatorRows(t, h)) // a preview changes nothing

	// Between preview and confirmation one is redriven by hand, and the run is cancelled.
	_, err = h.ops.Redrive(ctx, scope, wires[1].ID, "console:ann", "checked by hand")
	require.NoError(t, err)
	_, err = h.effects.CancelRun(ctx, "run-1", "test", "stop", &effects.RunOpts{TenantID: "acme"})
	require.NoError(t, err)
	_, err = h.ops.RedriveMany(ctx, scope, ids(preview), "cli:bob", "")
	require.ErrorAs(t, err, new(*ops.FieldError))
	result, err := h.ops.RedriveMany(ctx, scope, append(ids(preview), other.ID), "cli:bob", "outage over")
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{wires[2].ID, wires[0].ID}, result.Resolved)
	require.Len(t, result.Skipped, 3)
	require.Equal(t, "not FAILED any more", result.Skipped[wires[1].ID])
	require.Equal(t, "not found", result.Skipped[other.ID])
	require.Contains(t, result.Skipped[inRun.ID], "refused: ")
	require.Contains(t, result.Skipped[inRun.ID], "was cancelled")
	for id, want := range map[uuid.UUID]effects.State{
		wires[0].ID: effects.StatePending, wires[1].ID: effects.StatePending, wires[2].ID: effects.StatePending,
		inRun.ID: effects.StateFailed, other.ID: effects.StateFailed,
	} {
		e, err := h.effects.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, e.State)
	}
	require.Equal(t, 3, countOperatorRows(t, h))
	_, err = h.ops.Redrive(ctx, scope, other.ID, "ann", "out of scope")
	require.ErrorIs(t, err, ops.ErrNotFound)
}
