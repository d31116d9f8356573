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
	"github.com/reckonhq/reckon/effects/httpconn"
)

// TestConnectors: the registered connectors and a stored HTTP connector are listed with their
// policy, tags, timeout, attempts and (for the HTTP one) stored definition; the outcomes of the
// last hour are counted within scope.
func TestConnectors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newHarness(t)
	_, _, err := httpconn.Put(ctx, e.pool, httpconn.Definition{
		Name: "http.lookup", Tags: []effects.Tag{effects.TagRead}, DispatchURL: "http://127.0.0.1:1/lookup", Timeout: 2 * time.Second,
	})
	require.NoError(t, err)
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

func connectorNames(list []ops.ConnectorSummary) []string {
	names := make([]string, len(list))
	for i, c := range list {
		names[i] = c.Name
	}
	return names
}
