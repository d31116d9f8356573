package ops_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/cmd/server/internal/pagecursor"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// walk lists every page of f and returns the effects in order.
func walk(t *testing.T, h *harness, f ops.EffectFilter) []*effects.Effect {
	t.Helper()
	var all []*effects.Effect
	for {
		page, next, err := h.ops.Effects(context.Background(), f)
		require.NoError(t, err)
		all = append(all, page...)
		if next == "" {
			return all
		}
		f.After = next
	}
}

func TestEffectsFiltersAcrossTenants(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	turn := uuid.New()
	var want []*effects.Effect // every effect, oldest first
	for i := range 12 {
		tenant := []string{"acme", "globex", "initech"}[i%3]
		state := []effects.State{effects.StatePending, effects.StateConfirmed, effects.StateStuck, effects.StateFailed}[i%4]
		connector := []string{connWire, connMail}[i%2]
		want = append(want, h.insertEffect(t, tenant, connector, fmt.Sprintf("key-%d", i), state, func(s *effects.Spec) {
			s.BusinessKey = fmt.Sprintf("order-%d", i%2)
			if i == 7 {
				s.RunID, s.TurnID = "run-7", &turn
			}
		}))
	}
	newestFirst := func(pick func(e *effects.Effect) bool) []uuid.UUID {
		out := []uuid.UUID{}
		for i := len(want) - 1; i >= 0; i-- {
			if pick(want[i]) {
				out = append(out, want[i].ID)
			}
		}
		return out
	}
	all := ops.Scope{}
	// Every tenant, newest first, across pages of 5.
	require.Equal(t, newestFirst(func(*effects.Effect) bool { return true }), ids(walk(t, h, ops.EffectFilter{Scope: all, Limit: 5})))

	for _, tc := range []struct {
		name  string
		query url.Values
		scope ops.Scope
		pick  func(e *effects.Effect) bool
	}{
		{"tenant", url.Values{"tenant": {"globex"}}, all, func(e *effects.Effect) bool { return e.TenantID == "globex" }},
		{"state", url.Values{"state": {"STUCK"}}, all, func(e *effects.Effect) bool { return e.State == effects.StateStuck }},
		{"connector and state", url.Values{"connector": {connMail}, "state": {"CONFIRMED"}}, all,
			func(e *effects.Effect) bool { return e.Connector == connMail && e.State == effects.StateConfirmed }},
		{"idempotency key", url.Values{"idempotency_key": {"key-4"}}, all, func(e *effects.Effect) bool { return e.IdempotencyKey == "key-4" }},
		{"business key", url.Values{"business_key": {"order-1"}}, all, func(e *effects.Effect) bool { return e.BusinessKey == "order-1" }},
		{"run", url.Values{"run": {"run-7"}}, all, func(e *effects.Effect) bool { return e.RunID == "run-7" }},
		{"turn", url.Values{"turn": {turn.String()}}, all, func(e *effects.Effect) bool { return e.TurnID != nil && *e.TurnID == turn }},
		{"created after", url.Values{"created_after": {want[5].CreatedAt.Format(time.RFC3339Nano)}}, all,
			func(e *effects.Effect) bool { return !e.CreatedAt.Before(want[5].CreatedAt) }},
		{"created before", url.Values{"created_before": {want[5].CreatedAt.Format(time.RFC3339Nano)}}, all,
			func(e *effects.Effect) bool { return e.CreatedAt.Before(want[5].CreatedAt) }},
		{"scope", url.Values{}, ops.Scope{Tenants: []string{"acme", "initech"}},
			func(e *effects.Effect) bool { return e.TenantID != "globex" }},
		{"scope and state", url.Values{"state": {"PENDING"}}, ops.Scope{Tenants: []string{"acme"}},
			func(e *effects.Effect) bool { return e.TenantID == "acme" && e.State == effects.StatePending }},
		{"tenant outside the scope", url.Values{"tenant": {"globex"}}, ops.Scope{Tenants: []string{"acme"}},
			func(*effects.Effect) bool { return false }},
		{"empty scope", url.Values{}, ops.Scope{Tenants: []string{}}, func(*effects.Effect) bool { return false }},
		{"key of another tenant in scope", url.Values{"idempotency_key": {"key-4"}}, ops.Scope{Tenants: []string{"acme"}},
			func(*effects.Effect) bool { return false }},
	} {
		f, err := ops.ParseEffectFilter(tc.query)
		require.NoError(t, err, tc.name)
		f.Scope, f.Limit = tc.scope, 2
		require.Equal(t, newestFirst(tc.pick), ids(walk(t, h, f)), tc.name)
	}
	require.Empty(t, newestFirst(func(e *effects.Effect) bool { return e.IdempotencyKey == "key-4" && e.TenantID == "acme" }))

	_, _, err := h.ops.Effects(context.Background(), ops.EffectFilter{Limit: 501})
	require.ErrorAs(t, err, new(*ops.FieldError))
	_, _, err = h.ops.Effects(context.Background(), ops.EffectFilter{After: "garbage"})
	require.ErrorAs(t, err, new(*ops.FieldError))
}

func TestResolveAndCancelInScope(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	acme := ops.Scope{Tenants: []string{"acme"}}
	stuck := h.insertEffect(t, "acme", connWire, "wire-1", effects.StateStuck)
	other := h.insertEffect(t, "globex", connWire, "wire-2", effects.StateStuck)
	pending := h.insertEffect(t, "acme", connMail, "mail-1", effects.StatePending)
	otherPending := h.insertEffect(t, "globex", connMail, "mail-2", effects.StatePending)

	// Bad input: a *FieldError naming the field, nothing changes.
	for _, tc := range []struct {
		to            effects.State
		actor, reason string
		field         string
	}{
		{"DONE", "cli:ann", "paid", "to"},
		{effects.StateStuck, "cli:ann", "paid", "to"},
		{effects.StateConfirmed, "", "paid", "actor"},
		{effects.StateConfirmed, "cli:ann", "  ", "reason"},
		{effects.StateConfirmed, "cli:ann", "bad\x00reason", "reason"},
		{effects.StateConfirmed, "cli:ann", string(make([]byte, 1001)), "reason"},
		{effects.StateConfirmed, "cli:\xff", "paid", "actor"},
	} {
		_, err := h.ops.Resolve(ctx, ops.Scope{}, stuck.ID, tc.to, tc.actor, tc.reason)
		var fe *ops.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, tc.field, fe.Field)
	}
	_, err := h.ops.Cancel(ctx, ops.Scope{}, pending.ID, "cli:ann", "")
	require.ErrorAs(t, err, new(*ops.FieldError))

	// Outside the scope, or missing: ErrNotFound, untouched.
	_, err = h.ops.Resolve(ctx, acme, other.ID, effects.StateFailed, "cli:ann", "not sent")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = h.ops.Resolve(ctx, acme, uuid.New(), effects.StateFailed, "cli:ann", "not sent")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = h.ops.Cancel(ctx, acme, otherPending.ID, "cli:ann", "not wanted")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = h.ops.Evidence(ctx, acme, other.ID)
	require.ErrorIs(t, err, ops.ErrNotFound)
	require.Equal(t, 0, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_effect_transitions WHERE actor LIKE 'operator:%'`))
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK"}, testkit.Path(t, h.effects, other.ID))

	// In scope: done, with the actor and reason in the trail.
	resolved, err := h.ops.Resolve(ctx, acme, stuck.ID, effects.StateFailed, "cli:ann", "never sent: bank says so")
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, resolved.State)
	history, err := h.effects.History(ctx, stuck.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, "operator:cli:ann", last.Actor)
	require.Equal(t, "never sent: bank says so", last.Reason)
	_, err = h.ops.Resolve(ctx, acme, stuck.ID, effects.StateConfirmed, "cli:ann", "again")
	require.ErrorIs(t, err, effects.ErrNotStuck)

	cancelled, err := h.ops.Cancel(ctx, acme, pending.ID, "console:bob", "customer withdrew")
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, cancelled.State)
	_, err = h.ops.Cancel(ctx, acme, pending.ID, "console:bob", "again")
	require.ErrorIs(t, err, effects.ErrNotCancellable)
	require.Equal(t, 1, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_effect_transitions WHERE effect_id = $1 AND actor = 'operator:console:bob'`, pending.ID))
}

func TestParseEffectFilter(t *testing.T) {
	t.Parallel()
	turn := uuid.New()
	cursor := pagecursor.Cursor{At: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), ID: uuid.NewString()}.String()
	f, err := ops.ParseEffectFilter(url.Values{
		"tenant": {"acme"}, "state": {"stuck"}, "connector": {"bank.wire"}, "idempotency_key": {"wire-1"},
		"business_key": {"order-9"}, "run": {"run-1"}, "turn": {turn.String()}, "created_after": {"2026-01-02T15:04:05Z"},
		"created_before": {"2026-02-01T00:00:00+01:00"}, "limit": {"20"}, "after": {cursor},
	})
	require.NoError(t, err)
	require.Equal(t, ops.EffectFilter{
		Tenant: "acme", State: effects.StateStuck, Connector: "bank.wire", IdempotencyKey: "wire-1", BusinessKey: "order-9",
		RunID: "run-1", TurnID: turn, CreatedAfter: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		CreatedBefore: time.Date(2026, 2, 1, 0, 0, 0, 0, time.FixedZone("", 3600)), Limit: 20, After: cursor,
	}, f)

	empty, err := ops.ParseEffectFilter(url.Values{"state": {""}})
	require.NoError(t, err)
	require.Equal(t, ops.EffectFilter{Limit: ops.DefaultLimit}, empty)

	for _, tc := range []struct {
		name  string
		query url.Values
		field string
	}{
		{"unknown filter", url.Values{"status": {"STUCK"}}, "status"},
		{"twice", url.Values{"state": {"STUCK", "FAILED"}}, "state"},
		{"bad state", url.Values{"state": {"DONE"}}, "state"},
		{"bad tenant", url.Values{"tenant": {"-acme"}}, "tenant"},
		{"NUL in connector", url.Values{"connector": {"bank\x00wire"}}, "connector"},
		{"invalid UTF-8 key", url.Values{"idempotency_key": {"\xff"}}, "idempotency_key"},
		{"long business key", url.Values{"business_key": {strings.Repeat("k", 513)}}, "business_key"},
		{"long run", url.Values{"run": {strings.Repeat("r", 201)}}, "run"},
		{"bad turn", url.Values{"turn": {"turn-1"}}, "turn"},
		{"bad time", url.Values{"created_after": {"yesterday"}}, "created_after"},
		{"date only", url.Values{"created_before": {"2026-01-02"}}, "created_before"},
		{"zero limit", url.Values{"limit": {"0"}}, "limit"},
		{"huge limit", url.Values{"limit": {"501"}}, "limit"},
		{"bad cursor", url.Values{"after": {"not-a-cursor"}}, "after"},
		{"cursor without a UUID", url.Values{"after": {pagecursor.Cursor{At: time.Now(), ID: "run-1"}.String()}}, "after"},
	} {
		_, err := ops.ParseEffectFilter(tc.query)
		var fe *ops.FieldError
		require.ErrorAs(t, err, &fe, tc.name)
		require.Equal(t, tc.field, fe.Field, tc.name)
		require.True(t, strings.HasPrefix(err.Error(), tc.field+": "), "%s: %v", tc.name, err)
	}
}
