package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// TestTwoReactorsRace runs two reactors over the same 1,000 effects: no effect is ever in flight
// on two workers at once, and the bank performs each exactly once.
func TestTwoReactorsRace(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const n = 1000

	var (
		inFlight  sync.Map // effect id → struct{}
		overlaps  atomic.Int64
		byReactor [2]atomic.Int64
		clients   [2]*effects.Client
		bankWire  = fakebank.ConnectorOptions{BaseURL: h.bank.URL(), StatusCheck: true, Backoff: testkit.FastBackoff}.Connector()
		ctx       = context.Background()
	)
	for i := range clients {
		registry := effects.NewRegistry()
		connector := bankWire
		connector.Dispatch = func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			if _, busy := inFlight.LoadOrStore(call.EffectID, struct{}{}); busy {
				overlaps.Add(1)
			}
			defer inFlight.Delete(call.EffectID)
			byReactor[i].Add(1)
			return bankWire.Dispatch(ctx, call)
		}
		require.NoError(t, registry.Register(connector))
		config := testkit.FastConfig(registry)
		config.ID = fmt.Sprintf("racer-%d", i)
		client, err := effects.NewClient(h.pool, config)
		require.NoError(t, err)
		clients[i] = client
	}

	specs := make([]effects.Spec, n)
	for i := range specs {
		specs[i] = effects.Spec{Connector: "bank.wire", IdempotencyKey: fmt.Sprintf("race-%04d", i), Args: map[string]any{"account": "a", "amount": i + 1}}
	}
	var enqueued []*effects.Effect
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		var err error
		enqueued, err = clients[0].EnqueueManyTx(ctx, tx, specs, nil)
		return err
	}))
	for _, client := range clients {
		require.NoError(t, client.Start(ctx))
	}
	defer func() {
		for _, client := range clients {
			require.NoError(t, client.Stop(context.Background()))
		}
	}()

	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'CONFIRMED'`) == n
	}, 60*time.Second, 50*time.Millisecond, "all effects confirmed")
	require.Zero(t, overlaps.Load(), "an effect was in flight on two workers at once")
	for i, e := range enqueued {
		require.Equal(t, 1, h.bank.Count(e.IdempotencyKey), "effect %d performed once", i)
	}
	require.Len(t, h.bank.Ledger(), n)
	require.Equal(t, int64(n), byReactor[0].Load()+byReactor[1].Load(), "one call per effect")
	require.Positive(t, byReactor[0].Load(), "reactor 0 took part")
	require.Positive(t, byReactor[1].Load(), "reactor 1 took part")
}

// TestRescuedJobIsNotCalledBlindly: River runs a dispatch job again after a run that claimed the
// attempt and died (simulated here by rewinding the job as River's rescuer does). A non-idempotent
// effect is reconciled instead of called; an idempotent one is called again with the same key.
func TestRescuedJobIsNotCalledBlindly(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.wire(fakebank.ConnectorOptions{Name: "bank.upsert", Tags: idempotentTags})
	h.bank.SetIdempotent(true)
	ctx := context.Background()
	later := &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)}

	wire, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "rescued-1", Args: map[string]any{"account": "a", "amount": 1}}, later)
	require.NoError(t, err)
	upsert, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.upsert", IdempotencyKey: "rescued-2", Args: map[string]any{"account": "a", "amount": 1}}, later)
	require.NoError(t, err)
	// As River leaves a job whose worker died and was rescued: attempt 1 spent, available again.
	_, err = h.pool.Exec(ctx, `UPDATE river_job SET attempt = 1, attempted_at = now(), state = 'available', scheduled_at = now()
		WHERE kind = 'reckon_dispatch'`)
	require.NoError(t, err)
	h.start()

	require.Equal(t, effects.StateConfirmed, h.wait(wire.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(wire.ID))
	require.Equal(t, 1, h.bank.Count("rescued-1"))

	require.Equal(t, effects.StateConfirmed, h.wait(upsert.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(upsert.ID))
}

// TestLateOutcomeIsFencedOut: a call that outlives its timeout and margin is presumed dead; the
// sweeper makes the effect UNKNOWN and reconciliation confirms it. When the late call returns, its
// outcome is refused by the fence and kept in the audit trail only.
func TestLateOutcomeIsFencedOut(t *testing.T) {
	t.Parallel()
	h := setup(t)
	release := make(chan struct{})
	var calls atomic.Int64
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "stubborn", Tags: wireTags, Timeout: 500 * time.Millisecond, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			calls.Add(1)
			<-release // ignores its context, as badly written clients do
			return json.RawMessage(`{"late":true}`), nil
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{"seen":"by status check"}`)), nil
		},
	}))
	h.start()
	effect := h.enqueue("stubborn", "late-1", 1)
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.JSONEq(t, `{"seen":"by status check"}`, string(done.Result))
	close(release)

	require.Eventually(t, func() bool {
		return h.metric("reckon_effect_fenced_writes_total", map[string]string{"connector": "stubborn"}) == 1
	}, 10*time.Second, 20*time.Millisecond)
	history, err := h.client.History(context.Background(), effect.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, effects.StateConfirmed, last.From)
	require.Equal(t, effects.StateConfirmed, last.To)
	require.Equal(t, "fenced out: confirmed", last.Reason)
	require.JSONEq(t, `{"seen":"by status check"}`, string(h.mustGet(effect.ID).Result), "the late outcome changed nothing")
	require.Equal(t, int64(1), calls.Load())
}

func (h *harness) mustGet(id uuid.UUID) *effects.Effect {
	h.t.Helper()
	effect, err := h.client.Get(context.Background(), id)
	require.NoError(h.t, err)
	return effect
}

// TestSweeperTakesOverLostWork: an effect whose dispatch job vanished, and an inline attempt whose
// caller hangs past its lease, are both made UNKNOWN by the sweeper and resolved by
// reconciliation — never by a blind second call.
func TestSweeperTakesOverLostWork(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	release := make(chan struct{})
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "hanging", Tags: wireTags, Timeout: 300 * time.Millisecond, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			<-release
			return json.RawMessage(`{}`), nil
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{"found":true}`)), nil
		},
	}))
	ctx := context.Background()

	lost, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "lost-1", Args: map[string]any{"account": "a", "amount": 1}},
		&effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `DELETE FROM river_job`)
	require.NoError(t, err)

	inline := make(chan *effects.Effect, 1)
	go func() {
		effect, _ := h.client.Do(ctx, effects.Spec{Connector: "hanging", IdempotencyKey: "inline-hang", Args: map[string]any{}})
		inline <- effect
	}()
	h.start()

	require.Equal(t, effects.StateConfirmed, h.wait(lost.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(lost.ID))
	require.Equal(t, 1, h.bank.Count("lost-1"))

	var hungID uuid.UUID
	require.Eventually(t, func() bool {
		return h.pool.QueryRow(ctx, `SELECT id FROM reckon_effects WHERE idempotency_key = 'inline-hang'`).Scan(&hungID) == nil
	}, 5*time.Second, 10*time.Millisecond)
	hung := h.wait(hungID)
	require.Equal(t, effects.StateConfirmed, hung.State)
	require.JSONEq(t, `{"found":true}`, string(hung.Result))
	history, err := h.client.History(ctx, hungID)
	require.NoError(t, err)
	require.Equal(t, "inline attempt's lease expired: outcome unknown; reconcile instead of calling again", history[1].Reason)
	close(release)
	require.Equal(t, effects.StateConfirmed, (<-inline).State, "Do reports the state it finds once fenced out")
	require.Positive(t, h.metric("reckon_effect_swept_total", map[string]string{"reason": "inline attempt's lease expired"}))
}

// TestFencedOutWriteLeavesNoJob: an attempt presumed dead whose late outcome is ambiguous would
// hand the effect to a reconcile job; fenced out, its transaction is rolled back, so the only
// reconcile job is the sweeper's.
func TestFencedOutWriteLeavesNoJob(t *testing.T) {
	t.Parallel()
	h := setup(t)
	release := make(chan struct{})
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "late-and-unsure", Tags: wireTags, Timeout: 300 * time.Millisecond, Backoff: testkit.FastBackoff,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			<-release
			return nil, errors.New("connection reset")
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) {
			return effects.Present(json.RawMessage(`{}`)), nil
		},
	}))
	h.start()
	effect := h.enqueue("late-and-unsure", "unsure-1", 1)
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	close(release)
	require.Eventually(t, func() bool {
		return h.metric("reckon_effect_fenced_writes_total", map[string]string{"connector": "late-and-unsure"}) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_reconcile'`), "no orphan reconcile job")
}
