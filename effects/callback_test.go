package effects_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// requireRefused checks that a callback for the effect was refused with ErrNotAwaitingCallback
// naming why, that the effect is as it was, and that the refusal is the last entry of its history.
func (h *harness) requireRefused(before *effects.Effect, why string, result json.RawMessage) {
	h.t.Helper()
	ctx := context.Background()
	path := h.path(before.ID)
	got, refused := h.client.Callback(ctx, before.ID.String(), result, "", nil)
	require.ErrorIs(h.t, refused, effects.ErrNotAwaitingCallback)
	require.ErrorContains(h.t, refused, why)
	require.Equal(h.t, before.ID, got.ID)
	after := h.mustGet(before.ID)
	require.Equal(h.t, before.State, after.State)
	require.Equal(h.t, before.Attempts, after.Attempts)
	require.Equal(h.t, string(before.Result), string(after.Result))
	require.Equal(h.t, path, h.path(before.ID), "no transition")
	history, err := h.client.History(ctx, before.ID)
	require.NoError(h.t, err)
	last := history[len(history)-1]
	require.Equal(h.t, "callback", last.Actor)
	require.Equal(h.t, before.State, last.From)
	require.Equal(h.t, before.State, last.To)
	require.Equal(h.t, "callback not applied: "+refused.Error(), last.Reason)
	require.JSONEq(h.t, `{"correlation_id":"`+before.ID.String()+`","reported":"CONFIRMED","result":`+string(result)+`}`, string(last.Detail))
}

// TestCallbackOnlyWhileAwaiting: a callback settles only an effect that awaits one. An ordinary
// effect — CONFIRMED, UNKNOWN after a lost answer, PENDING waiting for a retry — is refused with
// ErrNotAwaitingCallback under its self-routing id (which anyone can work out from the effect id):
// nothing changes but a record of the refusal. An attempt in flight is the one exception, as its
// upstream may call back before the dispatch records the acceptance: that callback settles the
// effect and the dispatch's own answer is fenced out.
func TestCallbackOnlyWhileAwaiting(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	idempotent := []effects.Tag{effects.TagWrite, effects.TagIdempotent}
	hour := func(int) time.Duration { return time.Hour }
	inFlight, release := make(chan struct{}, 1), make(chan struct{})
	for _, c := range []effects.Connector{
		{Name: "sync.ok", Tags: idempotent, Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{"paid":true}`), nil
		}},
		{Name: "sync.lost", Tags: []effects.Tag{effects.TagWrite}, Backoff: hour,
			Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
				return nil, errors.New("connection reset by peer")
			},
			StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
				return effects.Inconclusive("the upstream is down"), nil
			}},
		{Name: "sync.busy", Tags: idempotent, Backoff: hour, Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return nil, effects.Retryable(errors.New("503 without Retry-After"))
		}},
		{Name: "sync.slow", Tags: idempotent, Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			inFlight <- struct{}{}
			<-release
			return json.RawMessage(`{"by":"dispatch"}`), nil
		}},
	} {
		require.NoError(t, h.registry.Register(c))
	}
	h.start()
	enqueue := func(connector string) *effects.Effect {
		e, err := h.client.Enqueue(ctx, effects.Spec{Connector: connector, IdempotencyKey: connector}, nil)
		require.NoError(t, err)
		return e
	}
	awaitState := func(id uuid.UUID, ok func(*effects.Effect) bool) *effects.Effect {
		require.Eventually(t, func() bool { return ok(h.mustGet(id)) }, 20*time.Second, 10*time.Millisecond)
		return h.mustGet(id)
	}
	forged := json.RawMessage(`{"paid":"forged"}`)

	confirmed := h.wait(enqueue("sync.ok").ID)
	require.Equal(t, effects.StateConfirmed, confirmed.State)
	h.requireRefused(confirmed, "is CONFIRMED and was never accepted upstream", forged)

	unknown := awaitState(enqueue("sync.lost").ID, func(e *effects.Effect) bool { return e.State == effects.StateUnknown })
	h.requireRefused(unknown, "is UNKNOWN and was never accepted upstream", forged)

	retrying := awaitState(enqueue("sync.busy").ID, func(e *effects.Effect) bool { return e.Attempts == 1 })
	require.Equal(t, effects.StatePending, retrying.State)
	require.Eventually(t, func() bool { // its job snoozed: the attempt is over
		return h.count(`SELECT count(*) FROM river_job j JOIN reckon_effects e ON e.job_id = j.id
			WHERE e.id = $1 AND j.state = 'scheduled'`, retrying.ID) == 1
	}, 20*time.Second, 10*time.Millisecond)
	h.requireRefused(retrying, "is waiting for dispatch attempt 2", forged)

	slow := enqueue("sync.slow")
	<-inFlight
	settled, err := h.client.Callback(ctx, slow.ID.String(), json.RawMessage(`{"by":"callback"}`), "", nil)
	require.NoError(t, err, "an attempt in flight may be overtaken by its callback")
	require.Equal(t, effects.StateConfirmed, settled.State)
	close(release)
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch' AND state = 'running'`) == 0
	}, 20*time.Second, 10*time.Millisecond)
	after := h.mustGet(slow.ID)
	require.JSONEq(t, `{"by":"callback"}`, string(after.Result), "the dispatch's answer was fenced out")
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(slow.ID))
	require.Equal(t, slow.ID.String(), after.CorrelationID, "known by its callback's id from now on")
	repeat, err := h.client.Callback(ctx, slow.ID.String(), json.RawMessage(`{"by":"callback"}`), "", nil)
	require.NoError(t, err, "a repeat of the applied callback")
	require.Equal(t, effects.StateConfirmed, repeat.State)
}

// TestCallbackRefusedWhileRedispatchWaits: an effect that was accepted once, then sent back to
// PENDING by an operator, awaits its next dispatch, not a callback, until that dispatch is
// accepted again.
func TestCallbackRefusedWhileRedispatchWaits(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "blind.job", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Unsafe: true,
		AsyncTimeout: 100 * time.Millisecond,
		Dispatch:     func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") },
	}))
	h.start()
	e, err := h.client.Enqueue(ctx, effects.Spec{Connector: "blind.job", IdempotencyKey: "blind"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateStuck, h.wait(e.ID).State)
	require.NoError(t, h.client.Stop(ctx)) // nobody dispatches it again
	pending, err := h.client.Resolve(ctx, e.ID, effects.Resolution{To: effects.StatePending, Actor: "alice", Reason: "try again"}, nil)
	require.NoError(t, err)
	require.Equal(t, e.ID.String(), pending.CorrelationID, "accepted before")
	h.requireRefused(pending, "is waiting for dispatch attempt 1", json.RawMessage(`{"done":true}`))
}

// TestCallbackForOneEffect: CallbackOpts.EffectID limits a callback to one effect, under either of
// its ids; another effect's correlation id is ErrUnknownCorrelation and records nothing.
func TestCallbackForOneEffect(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()
	one := h.awaitAccepted(h.enqueueJob("jobs.run", "one", func(s *effects.Spec) { s.RunID = "r" }).ID)
	two := h.awaitAccepted(h.enqueueJob("jobs.run", "two", func(s *effects.Spec) { s.RunID = "r" }).ID)
	before := len(h.reasons(two.ID))

	for _, id := range []string{two.CorrelationID, two.ID.String(), "r:" + uuid.NewString()} {
		_, err := h.client.Callback(ctx, id, json.RawMessage(`{}`), "", &effects.CallbackOpts{EffectID: one.ID})
		require.ErrorIs(t, err, effects.ErrUnknownCorrelation, id)
	}
	_, err := h.client.Callback(ctx, two.CorrelationID, json.RawMessage(`{}`), "", &effects.CallbackOpts{EffectID: uuid.New()})
	require.ErrorIs(t, err, effects.ErrUnknownCorrelation, "no such effect")
	require.Len(t, h.reasons(two.ID), before, "nothing recorded")
	require.Equal(t, effects.StatePending, h.mustGet(two.ID).State)

	done, err := h.client.Callback(ctx, one.CorrelationID, json.RawMessage(`{"n":1}`), "", &effects.CallbackOpts{EffectID: one.ID})
	require.NoError(t, err)
	require.Equal(t, one.ID, done.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
}

// TestCallbackTx: the callback commits or rolls back with the caller's transaction, and a refusal
// returns the effect with the error, its record written in the transaction.
func TestCallbackTx(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()
	accepted := h.awaitAccepted(h.enqueueJob("jobs.run", "tx", nil).ID)

	rollback := errors.New("roll back")
	err := h.inTx(func(tx pgx.Tx) error {
		e, err := h.client.CallbackTx(ctx, tx, accepted.CorrelationID, json.RawMessage(`{"n":1}`), "", nil)
		require.NoError(t, err)
		require.Equal(t, effects.StateConfirmed, e.State)
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Equal(t, effects.StatePending, h.mustGet(accepted.ID).State, "rolled back with the caller's transaction")

	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.CallbackTx(ctx, tx, accepted.CorrelationID, json.RawMessage(`{"n":2}`), "", nil)
		return err
	}))
	require.JSONEq(t, `{"n":2}`, string(h.mustGet(accepted.ID).Result))

	before := len(h.reasons(accepted.ID))
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		e, err := h.client.CallbackTx(ctx, tx, accepted.CorrelationID, json.RawMessage(`{"n":3}`), "", nil)
		require.ErrorIs(t, err, effects.ErrCallbackConflict)
		require.NotNil(t, e, "a refusal returns the effect")
		_, err = h.client.CallbackTx(ctx, tx, "nonsense", json.RawMessage(`{}`), "", nil)
		require.ErrorIs(t, err, effects.ErrUnknownCorrelation, "tx is still usable after a refusal")
		return nil
	}))
	require.Len(t, h.reasons(accepted.ID), before+1, "the refusal committed with the transaction")
}

// TestCallbackSecret: every dispatch and cancel call carries the effect's own callback secret —
// CallbackSecret of its id, 32 bytes in hex, different for every effect and the same for every
// attempt — and status checks carry none.
func TestCallbackSecret(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	var (
		mu   sync.Mutex
		seen = map[string][]string{} // by call kind
	)
	record := func(kind string, call effects.Call) {
		mu.Lock()
		defer mu.Unlock()
		seen[kind] = append(seen[kind], call.EffectID.String()+"="+call.CallbackSecret)
	}
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "async.job", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		AsyncTimeout: 200 * time.Millisecond, HardTimeout: true,
		Dispatch: func(_ context.Context, call effects.Call) (json.RawMessage, error) {
			record("dispatch", call)
			return nil, effects.Accepted("")
		},
		Cancel: func(_ context.Context, call effects.Call) error {
			record("cancel", call)
			return nil
		},
	}))
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "async.soft", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, AsyncTimeout: 100 * time.Millisecond,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") },
		StatusCheck: func(_ context.Context, call effects.Call) (effects.Status, error) {
			record("status", call)
			return effects.Present(json.RawMessage(`{}`)), nil
		},
	}))
	h.start()
	var ids []uuid.UUID
	for _, key := range []string{"a", "b"} {
		e, err := h.client.Enqueue(ctx, effects.Spec{Connector: "async.job", IdempotencyKey: key}, nil)
		require.NoError(t, err)
		require.Equal(t, effects.StateFailed, h.wait(e.ID).State, "hard timeout: cancelled upstream")
		ids = append(ids, e.ID)
	}
	secrets := map[string]bool{}
	for _, id := range ids {
		secret, err := h.client.CallbackSecret(ctx, id)
		require.NoError(t, err)
		raw, err := hex.DecodeString(secret)
		require.NoError(t, err)
		require.Len(t, raw, 32)
		again, err := h.client.CallbackSecret(ctx, id)
		require.NoError(t, err)
		require.Equal(t, secret, again)
		secrets[secret] = true
		mu.Lock()
		require.Contains(t, seen["dispatch"], id.String()+"="+secret)
		require.Contains(t, seen["cancel"], id.String()+"="+secret)
		mu.Unlock()
	}
	require.Len(t, secrets, 2, "one secret per effect")

	// A status check gets none: it starts nothing that calls back.
	e, err := h.client.Enqueue(ctx, effects.Spec{Connector: "async.soft", IdempotencyKey: "soft"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State, "deadline, then the status check")
	mu.Lock()
	require.Equal(t, []string{e.ID.String() + "="}, seen["status"])
	mu.Unlock()
}
