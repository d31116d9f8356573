package httpconn_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// states returns the states an effect went through, in order, the insert included.
func states(t *testing.T, client *effects.Client, effect *effects.Effect) []effects.State {
	t.Helper()
	history, err := client.History(context.Background(), effect.ID)
	require.NoError(t, err)
	out := []effects.State{}
	for _, tr := range history {
		if len(out) == 0 || out[len(out)-1] != tr.To {
			out = append(out, tr.To)
		}
	}
	return out
}

// TestReactorWithHTTPConnector runs a started effects.Client whose connector is an HTTP connector
// stored in the database and synced into its registry, in front of the fake bank's wire-protocol
// endpoints. Each scripted behavior ends in the state the protocol table promises, and the bank's
// ledger shows every wire performed exactly once.
func TestReactorWithHTTPConnector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	bank := newBank(t)
	base := bank.URL() + fakebank.ReckonPrefix
	_, _, err := httpconn.Put(ctx, pool, httpconn.Definition{
		Name: "bank.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork},
		DispatchURL: base + "/wires", StatusURL: base + "/wires/status", CompensateURL: base + "/wires/compensate",
		// A timeout long enough for every answer on a loaded machine (a 503 answered after 300 ms
		// was taken for an unknown outcome in CI); the scripted timeouts hold until it passes.
		Timeout: 2 * time.Second, BackoffInitial: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	registry := effects.NewRegistry()
	var syncer httpconn.Syncer // the registry's, for its lifetime
	res, err := syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.Equal(t, []string{"bank.wire"}, res.Added)

	config := testkit.FastConfig(registry)
	config.Workers = 10
	client := testkit.NewClient(t, pool, config)
	require.NoError(t, client.Start(ctx))

	cases := []struct {
		key     string
		script  []fakebank.Behavior
		status  []fakebank.StatusBehavior
		want    effects.State
		path    []effects.State
		ledger  int // wires performed for the key
		compens int // compensations performed for the key
	}{
		{"ok", nil, nil, effects.StateConfirmed, []effects.State{"PENDING", "CONFIRMED"}, 1, 0},
		{"rejected", []fakebank.Behavior{fakebank.Reject}, nil, effects.StateFailed, []effects.State{"PENDING", "FAILED"}, 0, 0},
		{"busy", []fakebank.Behavior{fakebank.Unavailable, fakebank.Succeed}, nil, effects.StateConfirmed, []effects.State{"PENDING", "CONFIRMED"}, 1, 0},
		{"throttled", []fakebank.Behavior{fakebank.TooManyRequests, fakebank.Succeed}, nil, effects.StateConfirmed, []effects.State{"PENDING", "CONFIRMED"}, 1, 0},
		{"dropped", []fakebank.Behavior{fakebank.PerformThenDrop}, nil, effects.StateConfirmed, []effects.State{"PENDING", "UNKNOWN", "CONFIRMED"}, 1, 0},
		{"timeout", []fakebank.Behavior{fakebank.Timeout, fakebank.Succeed}, nil, effects.StateConfirmed, []effects.State{"PENDING", "UNKNOWN", "PENDING", "CONFIRMED"}, 1, 0},
		{"server-error", []fakebank.Behavior{fakebank.ServerError, fakebank.Succeed}, nil, effects.StateConfirmed, []effects.State{"PENDING", "UNKNOWN", "PENDING", "CONFIRMED"}, 1, 0},
		{"request-timeout", []fakebank.Behavior{fakebank.RequestTimeout, fakebank.Succeed}, nil, effects.StateConfirmed, []effects.State{"PENDING", "UNKNOWN", "PENDING", "CONFIRMED"}, 1, 0},
		{"twice", []fakebank.Behavior{fakebank.PerformTwiceThenDrop}, nil, effects.StateConfirmed, []effects.State{"PENDING", "UNKNOWN", "CONFIRMED"}, 2, 1},
		{"mystery", []fakebank.Behavior{fakebank.PerformThenDrop}, []fakebank.StatusBehavior{fakebank.StatusInconclusive, fakebank.StatusInconclusive, fakebank.StatusInconclusive, fakebank.StatusInconclusive, fakebank.StatusInconclusive}, effects.StateStuck, []effects.State{"PENDING", "UNKNOWN", "STUCK"}, 1, 0},
	}
	enqueued := make([]*effects.Effect, len(cases))
	for i, tc := range cases {
		bank.Script(tc.key, tc.script...)
		bank.ScriptStatus(tc.key, tc.status...)
		enqueued[i], err = client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: tc.key,
			Args: map[string]any{"account": "acc-1", "amount": 100}}, nil)
		require.NoError(t, err)
	}
	for i, tc := range cases {
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		effect, err := client.Wait(waitCtx, enqueued[i].ID)
		cancel()
		require.NoError(t, err, tc.key)
		require.Equal(t, tc.want, effect.State, "%s: %s", tc.key, effect.Error)
		require.Equal(t, tc.path, states(t, client, effect), tc.key)
		require.Equal(t, tc.ledger, bank.Count(tc.key), "%s: wires performed", tc.key)
		if tc.want == effects.StateConfirmed {
			var result struct {
				Key    string `json:"key"`
				Amount int64  `json:"amount"`
			}
			require.NoError(t, json.Unmarshal(effect.Result, &result), tc.key)
			require.Equal(t, tc.key, result.Key)
		}
		if tc.compens > 0 {
			require.Eventually(t, func() bool { return bank.Net(tc.key) == 100 }, 20*time.Second, 20*time.Millisecond,
				"%s: the duplicate wire is compensated through the compensate URL", tc.key)
		}
	}
}
