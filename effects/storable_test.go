package effects_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// A spec Postgres cannot store is refused before anything is written, and the caller's
// transaction stays usable: EnqueueTx must never abort it with a database error.
func TestEnqueueTxRefusesWhatPostgresCannotStore(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	for name, spec := range map[string]effects.Spec{
		"NUL in args":           {Args: json.RawMessage(`{"a":"x\u0000"}`)},
		"lone surrogate":        {Args: json.RawMessage(`{"a":"\ud800"}`)},
		"invalid UTF-8 in args": {Args: json.RawMessage("{\"a\":\"\xff\xfe\"}")},
		"huge number":           {Args: json.RawMessage(`{"n":1e1000000}`)},
		"NUL in a map value":    {Args: map[string]string{"a": "x\x00y"}},
		"NUL in the key":        {IdempotencyKey: "k\x00"},
		"latin-1 business key":  {BusinessKey: "caf\xe9"},
		"NUL in the run id":     {RunID: "r\x00"},
		"NUL in the tenant":     {TenantID: "t\x00"},
		"NUL in the turn group": {Position: &effects.Position{TurnGroup: "g\x00"}},
	} {
		t.Run(name, func(t *testing.T) {
			spec.Connector = "bank.wire"
			if spec.IdempotencyKey == "" && spec.Position == nil {
				spec.IdempotencyKey = "k-" + name
			}
			err := h.inTx(func(tx pgx.Tx) error {
				_, err := h.client.EnqueueTx(context.Background(), tx, spec, nil)
				require.Error(t, err)
				require.NotContains(t, err.Error(), "SQLSTATE", "refused by Reckon, not by Postgres")
				// The transaction is still usable: the caller can go on and commit its own work.
				_, err = h.client.EnqueueTx(context.Background(), tx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "ok-" + name}, nil)
				return err
			})
			require.NoError(t, err)
		})
	}
	_, err := h.client.Enqueue(context.Background(), effects.Spec{Connector: "bank.wire", IdempotencyKey: "k"},
		&effects.EnqueueOpts{Actor: "a\x00"})
	require.ErrorContains(t, err, "EnqueueOpts.Actor")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'k-%' OR idempotency_key = 'k'`))
}

// A connector's answer that cannot be stored is as good as no answer: UNKNOWN, then the status
// check decides; a status check result that cannot be stored is inconclusive. The reactor never
// fails on either, and an upstream's error text with NUL or invalid UTF-8 is recorded readably.
func TestUnstorableAnswersAreOutcomes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var checks atomic.Int32
	h.registry.MustRegister(effects.Connector{
		Name: "odd.upstream", Tags: []effects.Tag{effects.TagWrite}, Backoff: testkit.FastBackoff,
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			if call.IdempotencyKey == "garbled-error" {
				return nil, effects.Permanent(errorString("refused: \x00\xff"))
			}
			return json.RawMessage(`{"receipt":"r-1\u0000"}`), nil
		},
		StatusCheck: func(ctx context.Context, call effects.Call) (effects.Status, error) {
			if checks.Add(1) == 1 {
				return effects.Present(json.RawMessage(`{"n":1e-1000000}`)), nil
			}
			return effects.Present(json.RawMessage(`{"receipt":"r-1"}`)), nil
		},
	})
	h.start()

	effect, err := h.client.Enqueue(context.Background(), effects.Spec{Connector: "odd.upstream", IdempotencyKey: "nul-result"}, nil)
	require.NoError(t, err)
	settled := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, settled.State)
	require.JSONEq(t, `{"receipt":"r-1"}`, string(settled.Result))
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(effect.ID))
	require.EqualValues(t, 2, checks.Load(), "the first, unstorable, present answer counted as inconclusive")

	failed, err := h.client.Enqueue(context.Background(), effects.Spec{Connector: "odd.upstream", IdempotencyKey: "garbled-error"}, nil)
	require.NoError(t, err)
	settled = h.wait(failed.ID)
	require.Equal(t, effects.StateFailed, settled.State, "%v", h.path(failed.ID))
	require.True(t, strings.HasPrefix(settled.Error, "refused: \uFFFD\uFFFD"), "%q", settled.Error)
}

type errorString string

func (e errorString) Error() string { return string(e) }

// Callbacks, runs and operator actions refuse text Postgres cannot store with an error of their
// own, before any statement.
func TestOperatorAndCallbackTextIsChecked(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	effect := h.enqueue("bank.wire", "op-1", 5)
	for name, call := range map[string]func() error{
		"callback result": func() error {
			_, err := h.client.Callback(ctx, effect.ID.String(), json.RawMessage(`{"a":"\u0000"}`), "", nil)
			return err
		},
		"callback error": func() error { _, err := h.client.Callback(ctx, effect.ID.String(), nil, "bad\xff", nil); return err },
		"cancel run":     func() error { _, err := h.client.CancelRun(ctx, "r\x00", "ops", "why", nil); return err },
		"start run":      func() error { _, err := h.client.StartRun(ctx, effects.RunSpec{ID: "caf\xe9"}); return err },
		"cancel":         func() error { _, err := h.client.Cancel(ctx, effect.ID, "ops", "why\x00", nil); return err },
		"resolve": func() error {
			_, err := h.client.Resolve(ctx, effect.ID, effects.Resolution{To: effects.StateFailed, Actor: "\xff", Reason: "r"}, nil)
			return err
		},
	} {
		err := call()
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "SQLSTATE", "%s: refused by Reckon, not by Postgres", name)
		require.NotErrorIs(t, err, effects.ErrNotAwaitingCallback, "%s: refused for its text, before the state is looked at", name)
	}
	require.Equal(t, []string{">PENDING"}, h.path(effect.ID))
}
