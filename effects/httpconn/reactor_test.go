package httpconn_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/reckontest"
)

// TestReactorWithHTTPConnector runs an effects.Client whose connector is an HTTP connector stored
// in the database and synced into its registry, in front of a scripted upstream
// (reckontest.Upstream), through each of its URLs: dispatch, the status check of an UNKNOWN
// outcome (conclusive, or inconclusive until STUCK) and the compensation of a duplicate. Each ends
// in the state the protocol table promises, and the upstream shows every call performed exactly
// once — the duplicate twice, and its extra operation undone. (Every answer of the protocol table,
// through the same connector code, is reckontest's TestAnswers.)
func TestReactorWithHTTPConnector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := reckontest.NewDB(t)
	bank := reckontest.NewUpstream(t)
	def := bank.Definition("bank.wire")
	def.Tags = []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork}
	def.Timeout = 300 * time.Millisecond
	def.BackoffInitial, def.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	_, _, err := httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	registry := effects.NewRegistry()
	res, err := httpconn.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.Equal(t, []string{"bank.wire"}, res.Added)
	client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry, Workers: 10})

	inconclusive := effects.Inconclusive("the bank cannot tell")
	cases := []struct {
		key       string
		script    []reckontest.Answer
		status    []effects.Status
		want      effects.State
		path      []string
		performed int // operations the upstream performed for the key
	}{
		{"ok", nil, nil, effects.StateConfirmed, []string{">PENDING", "PENDING>CONFIRMED"}, 1},
		{"rejected", []reckontest.Answer{reckontest.Reject("no such account")}, nil, effects.StateFailed,
			[]string{">PENDING", "PENDING>FAILED"}, 0},
		{"dropped", []reckontest.Answer{reckontest.PerformThenDrop()}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, 1},
		{"timeout", []reckontest.Answer{reckontest.Hang()}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, 1},
		{"twice", []reckontest.Answer{reckontest.PerformThenDrop().Times(2)}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, 2},
		{"mystery", []reckontest.Answer{reckontest.PerformThenDrop()},
			[]effects.Status{inconclusive, inconclusive, inconclusive, inconclusive, inconclusive}, effects.StateStuck,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK"}, 1},
	}
	enqueued := make([]*effects.Effect, len(cases))
	for i, tc := range cases {
		bank.Script(tc.key, tc.script...)
		bank.ScriptStatus(tc.key, tc.status...)
		enqueued[i], err = client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: tc.key,
			Args: map[string]any{"account": "acc-1", "amount": 100}}, nil)
		require.NoError(t, err)
	}
	reckontest.Drain(t, pool, client, nil)

	for i, tc := range cases {
		effect := reckontest.RequireState(t, client, enqueued[i].ID, tc.want)
		reckontest.RequirePath(t, client, effect.ID, tc.path...)
		require.Equal(t, tc.performed, bank.Performed(tc.key), "%s: operations performed", tc.key)
		if tc.want == effects.StateConfirmed {
			var result struct{ Key string }
			require.NoError(t, json.Unmarshal(effect.Result, &result), tc.key)
			require.Equal(t, tc.key, result.Key, "the upstream's result")
		}
	}
	require.Equal(t, 1, bank.Performed("twice/compensate-duplicate-2"),
		"the duplicate operation is compensated through the compensate URL")
}
