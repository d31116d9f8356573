package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
)

// TestConnectors: the registered connectors and a stored HTTP connector are listed with their
// policy, tags, timeout, attempts and (for the HTTP one) stored definition; the outcomes of the
// last hour are counted within scope.
func TestConnectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	e.putLookup(t, 2*time.Second, effects.Limit{})
	for i, tenant := range []string{"acme", "globex", "globex"} {
		eff, err := e.effects.Enqueue(ctx, effects.Spec{TenantID: tenant, Connector: connWrite, IdempotencyKey: fmt.Sprint("k", i), Args: json.RawMessage(`{}`)}, nil)
		require.NoError(t, err)
		_, err = e.effects.Cancel(ctx, eff.ID, "test", "not wanted", nil)
		require.NoError(t, err)
	}

	list, err := e.ops.Connectors(ctx, allTenants)
	require.NoError(t, err)
	require.Equal(t, []string{connWire, "http.lookup", connMail, connWrite}, connectorNames(list), "by name")
	lookup, write := list[1], list[3]
	require.Equal(t, "http.lookup", lookup.Name)
	require.Equal(t, effects.PolicyPure, lookup.Policy)
	require.Equal(t, 2*time.Second, lookup.Timeout)
	require.Equal(t, 5, lookup.MaxAttempts, "the definition's default")
	var def map[string]any
	require.NoError(t, json.Unmarshal(lookup.Definition, &def))
	require.Equal(t, "http://127.0.0.1:1/lookup", def["dispatch_url"])
	require.Equal(t, map[effects.State]int64{effects.StateConfirmed: 0, effects.StateFailed: 0, effects.StateUnknown: 0, effects.StateStuck: 0}, lookup.Outcomes)

	require.Equal(t, connWrite, write.Name)
	registered, _ := e.registry.Get(connWrite)
	require.Equal(t, effects.PolicyOf(registered), write.Policy)
	require.Equal(t, []effects.Tag{effects.TagWrite, effects.TagExternal}, write.Tags)
	require.Equal(t, 3, write.MaxAttempts)
	require.Equal(t, 30*time.Second, write.Timeout)
	require.Nil(t, write.Definition, "not an HTTP connector")
	require.Equal(t, int64(3), write.Outcomes[effects.StateFailed])
	require.Equal(t, int64(0), write.Outcomes[effects.StateConfirmed])

	scoped, err := e.ops.Connectors(ctx, acmeOnly)
	require.NoError(t, err)
	require.Equal(t, int64(1), scoped[3].Outcomes[effects.StateFailed], "acme's only")
	none, err := e.ops.Connectors(ctx, noTenant)
	require.NoError(t, err)
	require.Equal(t, int64(0), none[3].Outcomes[effects.StateFailed])
	require.Equal(t, connectorNames(list), connectorNames(none), "the connectors themselves are not tenants'")
}

// putLookup stores the HTTP connector "http.lookup", a read, with timeout and limit.
func (h *harness) putLookup(t *testing.T, timeout time.Duration, limit effects.Limit) {
	t.Helper()
	_, _, err := httpconn.Put(context.Background(), h.pool, httpconn.Definition{
		Name: "http.lookup", Tags: []effects.Tag{effects.TagRead}, DispatchURL: "http://127.0.0.1:1/lookup", Timeout: timeout, Limit: limit,
	})
	require.NoError(t, err)
}

func connectorNames(list []ops.ConnectorSummary) []string {
	return mapped(list, func(c ops.ConnectorSummary) string { return c.Name })
}

// mapped is f of each of list.
func mapped[T any](list []T, f func(T) string) []string {
	out := make([]string, len(list))
	for i, item := range list {
		out[i] = f(item)
	}
	return out
}

// TestConnectorLimits: a connector's own limit (a registered one's, an HTTP definition's), the
// operator's limit with who set it and why, and its limit keys' state — the shared key always, a
// per-tenant key within scope only; SetLimit, ClearLimit and ResetLimit act on a listed connector
// in a scope of all tenants only.
func TestConnectorLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	e.putLookup(t, 0, effects.Limit{Rate: 5, MaxInFlight: 2})
	// bank.wire paused for a minute (its shared key); rest.write's key of globex fails once.
	e.exec(t, `SELECT reckon_limit_release($1, '', gen_random_uuid(), false, 0, 30000, true, 60000)`, connWire)
	e.exec(t, `SELECT reckon_limit_release($1, 'globex', gen_random_uuid(), true, 5, 30000, true, 0)`, connWrite)

	byName := func(scope ops.Scope) map[string]ops.ConnectorSummary {
		list, err := e.ops.Connectors(ctx, scope)
		require.NoError(t, err)
		out := map[string]ops.ConnectorSummary{}
		for _, c := range list {
			out[c.Name] = c
		}
		return out
	}
	all := byName(allTenants)
	lookup, wire, write, mail := all["http.lookup"], all[connWire], all[connWrite], all[connMail]
	require.Equal(t, &effects.Limit{Rate: 5, Per: time.Second, Burst: 5, MaxInFlight: 2, BreakFor: 30 * time.Second}, lookup.Limit,
		"the definition's, defaults filled in")
	require.Equal(t, "unlimited", mail.Limit.String(), "a registered connector without one")
	require.Nil(t, wire.Override)
	require.True(t, wire.Throttled(), "paused")
	require.Len(t, wire.LimitStates, 1)
	require.WithinDuration(t, time.Now().Add(time.Minute), *wire.LimitStates[0].PausedUntil, 10*time.Second)
	require.False(t, write.Throttled(), "one failure of five: closed")
	require.Equal(t, []string{"globex"}, tenantsOf(write.LimitStates))
	require.Equal(t, 1, write.LimitStates[0].Failures)
	require.False(t, lookup.Throttled())
	require.Empty(t, byName(acmeOnly)[connWrite].LimitStates, "globex's key is not acme's to see")
	require.Len(t, byName(acmeOnly)[connWire].LimitStates, 1, "the shared key is everyone's")

	// Set: recorded with who and why, listed; refused in a scope of some tenants, for a connector
	// not listed, without a reason, out of range.
	limit := effects.Limit{Rate: 10, Per: time.Minute, MaxInFlight: 3}
	_, err := e.ops.SetLimit(ctx, acmeOnly, connWire, limit, "cli:ann", "bank asked")
	require.ErrorIs(t, err, ops.ErrSharedLimit)
	_, err = e.ops.SetLimit(ctx, allTenants, "no.such", limit, "cli:ann", "bank asked")
	require.ErrorIs(t, err, ops.ErrNotFound)
	_, err = e.ops.SetLimit(ctx, allTenants, connWire, limit, "cli:ann", " ")
	requireField(t, err, "reason")
	_, err = e.ops.SetLimit(ctx, allTenants, connWire, effects.Limit{Rate: -1}, "cli:ann", "bank asked")
	requireField(t, err, "limit")
	setting, err := e.ops.SetLimit(ctx, allTenants, connWire, limit, "cli:ann", "bank asked")
	require.NoError(t, err)
	require.Equal(t, "operator:cli:ann", setting.SetBy)
	override := byName(allTenants)[connWire].Override
	require.NotNil(t, override)
	require.Equal(t, effects.Limit{Rate: 10, Per: time.Minute, Burst: 10, MaxInFlight: 3, BreakFor: 30 * time.Second}, override.Limit)
	require.Equal(t, []string{"operator:cli:ann", "bank asked"}, []string{override.SetBy, override.Reason})

	// Reset ends the pause; clear deletes the operator's limit; each says whether there was one.
	_, err = e.ops.ResetLimit(ctx, acmeOnly, connWire)
	require.ErrorIs(t, err, ops.ErrSharedLimit)
	reset, err := e.ops.ResetLimit(ctx, allTenants, connWire)
	require.NoError(t, err)
	require.True(t, reset)
	require.False(t, byName(allTenants)[connWire].Throttled())
	reset, err = e.ops.ResetLimit(ctx, allTenants, connWire)
	require.NoError(t, err)
	require.False(t, reset, "nothing left to reset")
	_, err = e.ops.ClearLimit(ctx, allTenants, "no.such")
	require.ErrorIs(t, err, ops.ErrNotFound)
	cleared, err := e.ops.ClearLimit(ctx, allTenants, connWire)
	require.NoError(t, err)
	require.True(t, cleared)
	require.Nil(t, byName(allTenants)[connWire].Override)
	cleared, err = e.ops.ClearLimit(ctx, allTenants, connWire)
	require.NoError(t, err)
	require.False(t, cleared)
}

func tenantsOf(states []effects.LimitState) []string {
	return mapped(states, func(s effects.LimitState) string { return s.TenantID })
}

// requireField requires err to be a *ops.FieldError on field.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *ops.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, field, fe.Field, fe.Message)
}

// TestParseLimit: the form's fields, each refused naming itself when it is not a number or
// duration or is out of effects.Limit's range.
func TestParseLimit(t *testing.T) {
	t.Parallel()
	limit, err := ops.ParseLimit(url.Values{"rate": {"20"}, "per": {"1m"}, "burst": {"5"}, "max_in_flight": {"3"},
		"per_tenant": {"on"}, "break_after": {"4"}, "break_for": {"90s"}, "reason": {"ignored"}})
	require.NoError(t, err)
	require.Equal(t, effects.Limit{Rate: 20, Per: time.Minute, Burst: 5, MaxInFlight: 3, PerTenant: true, BreakAfter: 4,
		BreakFor: 90 * time.Second}, limit)
	limit, err = ops.ParseLimit(url.Values{"rate": {""}, "per": {""}})
	require.NoError(t, err)
	require.Equal(t, effects.Limit{}, limit, "empty: none, or the default")

	for _, bad := range []struct{ field, value string }{
		{"rate", "-1"}, {"rate", "1000001"}, {"rate", "1e3"}, {"rate", " 5"}, {"rate", "99999999999999999999"},
		{"burst", "-3"}, {"max_in_flight", "2000000"}, {"break_after", "x"},
		{"per", "0.5ms"}, {"per", "2h"}, {"per", "-1s"}, {"per", "10"}, {"break_for", "500ms"}, {"break_for", "90"},
		{"per_tenant", "true"}, {"per_tenant", " "},
	} {
		_, err := ops.ParseLimit(url.Values{bad.field: {bad.value}})
		require.Error(t, err, "%s=%q", bad.field, bad.value)
		requireField(t, err, bad.field)
	}
}

// CheckLimit names the field effects.Limit.WithDefaults refuses, for every field.
func TestCheckLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field  string
		limit  effects.Limit
		name   string
		reason string
	}{
		{"name", effects.Limit{}, "", ""},
		{"name", effects.Limit{}, strings.Repeat("n", 201), ""},
		{"name", effects.Limit{}, "a\x00b", ""},
		{"name", effects.Limit{}, "a\xffb", ""},
		{"rate", effects.Limit{Rate: -1}, "c", ""},
		{"per_ms", effects.Limit{Per: time.Microsecond}, "c", ""},
		{"burst", effects.Limit{Burst: 1_000_001}, "c", ""},
		{"max_in_flight", effects.Limit{MaxInFlight: -2}, "c", ""},
		{"break_after", effects.Limit{BreakAfter: 1_000_001}, "c", ""},
		{"break_for_ms", effects.Limit{BreakFor: 2 * time.Hour}, "c", ""},
		{"reason", effects.Limit{}, "c", "a\x00b"},
		{"reason", effects.Limit{}, "c", "\xc0\xaf"},
		{"reason", effects.Limit{}, "c", strings.Repeat("r", 2001)},
	} {
		_, err := ops.CheckLimit(tc.name, tc.limit, tc.reason)
		var bad *ops.FieldError
		require.ErrorAs(t, err, &bad, "%+v", tc)
		require.Equal(t, tc.field, bad.Field, "%+v: %v", tc, err)
	}
	limit, err := ops.CheckLimit("c", effects.Limit{Rate: 7}, "ok")
	require.NoError(t, err)
	require.Equal(t, effects.Limit{Rate: 7, Per: time.Second, Burst: 7, BreakFor: 30 * time.Second}, limit)
}
