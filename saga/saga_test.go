package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/saga"
)

// Three steps complete in order, each built from the result of the one before, each performed
// once.
func TestThreeStepSagaCompletes(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	h.start(h.effects)

	started := h.begin(order{Account: "acct-1", Amount: 100, ShipAmount: 7}, nil)
	require.Equal(t, saga.StateRunning, started.State)
	require.Len(t, started.Steps, 1, "only the first step is enqueued at start")

	done := h.wait(started.ID)
	require.Equal(t, saga.StateCompleted, done.State, done.Error)
	require.Equal(t, 2, done.CurrentStep)
	require.Len(t, done.Steps, 3)
	var results []wireResult
	for i, step := range done.Steps {
		require.Equal(t, saga.StepConfirmed, step.State)
		require.Equal(t, []string{"reserve", "charge", "ship"}[i], step.Name)
		e := h.effect(step.EffectID)
		require.Equal(t, effects.StateConfirmed, e.State)
		require.Equal(t, saga.StepKey(done.ID, i), e.IdempotencyKey)
		require.Equal(t, saga.Owner, e.Owner)
		require.JSONEq(t, string(e.Result), string(step.Result))
		var r wireResult
		require.NoError(t, json.Unmarshal(step.Result, &r))
		results = append(results, r)
		require.Equal(t, 1, h.bank.Count(e.IdempotencyKey), "performed once")
	}
	// Results flowed: the charge carries the reservation, the shipment the charge.
	require.Equal(t, results[0].WireID, mustJSON(t, h.effect(done.Steps[1].EffectID).Args)["reservation"])
	require.Equal(t, results[1].WireID, mustJSON(t, h.effect(done.Steps[2].EffectID).Args)["charge"])
	require.Equal(t, int64(207), h.ledgerNet())
	require.Equal(t, []string{">RUNNING", "RUNNING>COMPLETED"}, h.history(done.ID))

	got, err := h.sagas.Get(context.Background(), done.ID)
	require.NoError(t, err)
	require.Equal(t, done.Steps, got.Steps)
	listed, next, err := h.sagas.List(context.Background(), saga.ListFilter{State: saga.StateCompleted})
	require.NoError(t, err)
	require.Nil(t, next)
	require.Len(t, listed, 1)
	require.Equal(t, done.ID, listed[0].ID)
	require.Len(t, listed[0].Steps, 3)
	h.eventuallyMetric(1, "reckon_sagas", map[string]string{"name": "order", "state": "COMPLETED"})
	require.Equal(t, 1.0, h.metric("reckon_saga_started_total", map[string]string{"name": "order"}))
	require.Equal(t, 1.0, h.metric("reckon_saga_transitions_total", map[string]string{"name": "order", "to": "COMPLETED"}))
}

// The shipment fails permanently: the charge is refunded, then the reservation released — in that
// order — and the ledger nets to zero.
func TestFailedStepCompensatesInReverseOrder(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	h.start(h.effects)

	done := h.wait(h.begin(order{Account: "acct-1", Amount: 100, ShipAmount: 0}, nil).ID)
	require.Equal(t, saga.StateCompensated, done.State)
	require.Contains(t, done.Error, "step 2 (ship) failed")
	require.Equal(t, []saga.StepState{saga.StepCompensated, saga.StepCompensated, saga.StepFailed},
		[]saga.StepState{done.Steps[0].State, done.Steps[1].State, done.Steps[2].State})
	require.Equal(t, effects.StateFailed, h.effect(done.Steps[2].EffectID).State)
	require.Equal(t, 0, h.bank.Count(saga.StepKey(done.ID, 2)), "the shipment never happened")

	// The compensations, in the order the bank performed them.
	var undone []string
	for _, e := range h.bank.Ledger() {
		if e.Of != "" {
			undone = append(undone, e.Of)
		}
	}
	require.Equal(t, []string{saga.StepKey(done.ID, 1), saga.StepKey(done.ID, 0)}, undone, "charge refunded, then reservation released")
	require.Equal(t, int64(0), h.ledgerNet())

	refund := h.effect(*done.Steps[1].CompensationEffectID)
	require.Equal(t, "card.refund", refund.Connector)
	require.Equal(t, saga.CompensationKey(done.ID, 1, 1, false), refund.IdempotencyKey)
	release := h.effect(*done.Steps[0].CompensationEffectID)
	require.Equal(t, done.Steps[0].EffectID, *release.CompensatesID, "effects' own compensation of the reservation")
	require.Equal(t, saga.CompensationKey(done.ID, 0, 1, true), release.IdempotencyKey)
	require.Equal(t, []string{">RUNNING", "RUNNING>COMPENSATING", "COMPENSATING>COMPENSATED"}, h.history(done.ID))
	h.eventuallyMetric(1, "reckon_sagas", map[string]string{"name": "order", "state": "COMPENSATED"})
}

// A compensation that keeps failing makes the saga STUCK after CompensationAttempts; the operator
// has it tried again once the upstream is fixed, and the saga finishes COMPENSATED. Another saga
// is finished by an operator who undid the step by hand.
func TestFailingCompensationIsStuckUntilAnOperatorResolves(t *testing.T) {
	t.Parallel()
	h := setup(t, 2)
	h.start(h.effects)
	ctx := context.Background()

	// The refund of the charge (UndoWith) is refused twice.
	first := h.begin(order{Account: "acct-1", Amount: 50}, func(id uuid.UUID) {
		h.bank.Script(saga.CompensationKey(id, 1, 1, false), fakebank.Reject)
		h.bank.Script(saga.CompensationKey(id, 1, 2, false), fakebank.Reject)
	})
	stuck := h.wait(first.ID)
	require.Equal(t, saga.StateStuck, stuck.State)
	require.Equal(t, 1, stuck.CurrentStep)
	require.Contains(t, stuck.StuckReason, "compensation of step 1 (charge) failed 2 times")
	require.Contains(t, stuck.Error, "step 2 (ship) failed")
	require.Equal(t, saga.StepCompensationStuck, stuck.Steps[1].State)
	require.Equal(t, saga.StepConfirmed, stuck.Steps[0].State, "the reservation waits: reverse order")
	require.Equal(t, 2, stuck.Steps[1].CompensationAttempts)
	require.Equal(t, int64(100), h.ledgerNet(), "nothing undone yet")
	listed, _, err := h.sagas.List(ctx, saga.ListFilter{State: saga.StateStuck})
	require.NoError(t, err)
	require.Len(t, listed, 1, "visible to operators")

	_, err = h.sagas.Resolve(ctx, first.ID, "shrug", "alice", "x")
	require.ErrorContains(t, err, "want")
	_, err = h.sagas.Resolve(ctx, first.ID, saga.RetryCompensation, "", "x")
	require.ErrorContains(t, err, "actor and a reason")
	resolved, err := h.sagas.Resolve(ctx, first.ID, saga.RetryCompensation, "alice", "card processor fixed")
	require.NoError(t, err)
	require.Equal(t, saga.StateCompensating, resolved.State)
	done := h.wait(first.ID)
	require.Equal(t, saga.StateCompensated, done.State)
	require.Equal(t, 3, done.Steps[1].CompensationAttempts)
	require.Equal(t, int64(0), h.ledgerNet())
	history, err := h.sagas.History(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, saga.StateStuck, history[2].To)
	require.Equal(t, "operator:alice", history[3].Actor)
	require.Equal(t, saga.StateCompensating, history[3].To)
	_, err = h.sagas.Resolve(ctx, first.ID, saga.RetryCompensation, "alice", "again")
	require.ErrorIs(t, err, saga.ErrNotStuck)

	// The release of the reservation (the connector's Compensate) is refused twice; the operator
	// released it by hand.
	second := h.begin(order{Account: "acct-2", Amount: 30}, func(id uuid.UUID) {
		h.bank.Script(saga.CompensationKey(id, 0, 1, true), fakebank.Reject)
		h.bank.Script(saga.CompensationKey(id, 0, 2, true), fakebank.Reject)
	})
	stuck = h.wait(second.ID)
	require.Equal(t, saga.StateStuck, stuck.State)
	require.Equal(t, 0, stuck.CurrentStep)
	require.Equal(t, saga.StepCompensated, stuck.Steps[1].State)
	resolved, err = h.sagas.Resolve(ctx, second.ID, saga.MarkCompensated, "bob", "released in the warehouse system")
	require.NoError(t, err)
	require.Equal(t, saga.StateCompensated, resolved.State)
	require.Equal(t, saga.StepCompensated, resolved.Steps[0].State)
	require.Equal(t, map[string]any{"resolved_by": "bob", "reason": "released in the warehouse system"}, mustJSON(t, resolved.Steps[0].CompensationResult))
	require.Equal(t, int64(30), h.bank.Net(saga.StepKey(second.ID, 0)), "the bank still holds it: released outside")
}

// A step whose outcome stays ambiguous holds the saga (RUNNING while reconciled), then STUCK; the
// operator resolves the effect and the saga goes on in the same transaction. (An operator's
// CONFIRMED carries no result: a later step that needs one fails to build and the saga
// compensates, which is why the held step here is the last.)
func TestStuckStepHoldsTheSagaUntilItsEffectIsResolved(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	h.start(h.effects)
	ctx := context.Background()

	s := h.begin(order{Account: "acct-1", Amount: 10, ShipAmount: 1}, func(id uuid.UUID) {
		key := saga.StepKey(id, 2)
		h.bank.Script(key, fakebank.PerformThenDrop)
		for range 5 {
			h.bank.ScriptStatus(key, fakebank.StatusInconclusive)
		}
	})
	stuck := h.wait(s.ID)
	require.Equal(t, saga.StateStuck, stuck.State)
	require.Equal(t, 2, stuck.CurrentStep)
	require.Equal(t, saga.StepStuck, stuck.Steps[2].State)
	require.Contains(t, stuck.StuckReason, "is STUCK; resolve it")
	require.Empty(t, stuck.Error, "nothing failed")
	_, err := h.sagas.Resolve(ctx, s.ID, saga.RetryCompensation, "alice", "x")
	require.ErrorIs(t, err, saga.ErrResolveEffect)

	_, err = h.effects.Resolve(ctx, stuck.Steps[2].EffectID, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "carrier confirmed by phone"}, nil)
	require.NoError(t, err)
	done, err := h.sagas.Get(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, saga.StateCompleted, done.State, "moved on in the resolution's transaction")
	require.Equal(t, []string{">RUNNING", "RUNNING>STUCK", "STUCK>COMPLETED"}, h.history(s.ID))
	require.Equal(t, 1, h.bank.Count(saga.StepKey(s.ID, 2)))
}

// Bad definitions and starts are refused with nothing changed; a step that cannot be built fails
// the saga, which compensates what came before.
func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	effect := func(saga.Input) (effects.Spec, error) { return effects.Spec{Connector: "card.charge"}, nil }

	for _, def := range []saga.Definition{
		{},
		{Name: "empty"},
		{Name: "noname", Steps: []saga.Step{{Effect: effect, Undo: saga.NoUndo()}}},
		{Name: "noeffect", Steps: []saga.Step{{Name: "a", Undo: saga.NoUndo()}}},
		{Name: "noundo", Steps: []saga.Step{{Name: "a", Effect: effect}}},
		{Name: "twice", Steps: []saga.Step{{Name: "a", Effect: effect, Undo: saga.NoUndo()}, {Name: "a", Effect: effect, Undo: saga.NoUndo()}}},
		{Name: "nilundo", Steps: []saga.Step{{Name: "a", Effect: effect, Undo: saga.UndoWith(nil)}}},
		{Name: "negative", CompensationAttempts: -1, Steps: []saga.Step{{Name: "a", Effect: effect, Undo: saga.NoUndo()}}},
		orderSaga(0),
	} {
		require.Error(t, h.sagas.Register(def), def.Name)
	}
	require.NoError(t, h.sagas.Register(saga.Definition{Name: "keyed", Steps: []saga.Step{{
		Name: "a", Undo: saga.NoUndo(),
		Effect: func(saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: "card.charge", IdempotencyKey: "mine"}, nil
		},
	}}}))
	require.NoError(t, h.sagas.Register(saga.Definition{Name: "broken", Steps: []saga.Step{{
		Name: "a", Undo: saga.NoUndo(),
		Effect: func(saga.Input) (effects.Spec, error) { return effects.Spec{}, errors.New("no can do") },
	}}}))

	_, err := h.sagas.Start(ctx, "nope", nil, nil)
	require.ErrorIs(t, err, saga.ErrUnknownDefinition)
	_, err = h.sagas.Start(ctx, "order", json.RawMessage(`{"account":`), nil)
	require.ErrorContains(t, err, "not valid JSON")
	_, err = h.sagas.Start(ctx, "keyed", nil, nil)
	require.ErrorContains(t, err, "derives the idempotency key")
	_, err = h.sagas.Start(ctx, "broken", nil, nil)
	require.ErrorContains(t, err, "no can do")
	_, err = h.sagas.Start(ctx, "order", order{Account: "a", Amount: 1}, &saga.StartOpts{TenantID: "t2"})
	require.NoError(t, err, "another tenant is fine")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_sagas`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))

	// A rolled-back start leaves nothing.
	err = pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		if _, err := h.sagas.StartTx(ctx, tx, "order", order{Account: "a", Amount: 1}, nil); err != nil {
			return err
		}
		return errors.New("the caller changed its mind")
	})
	require.ErrorContains(t, err, "changed its mind")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_sagas`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))

	// Start keys.
	one, err := h.sagas.Start(ctx, "order", order{Account: "k", Amount: 3}, &saga.StartOpts{Key: "order-42"})
	require.NoError(t, err)
	again, err := h.sagas.Start(ctx, "order", order{Account: "k", Amount: 3}, &saga.StartOpts{Key: "order-42"})
	require.NoError(t, err)
	require.True(t, again.Deduplicated)
	require.Equal(t, one.ID, again.ID)
	_, err = h.sagas.Start(ctx, "order", order{Account: "k", Amount: 4}, &saga.StartOpts{Key: "order-42"})
	require.ErrorIs(t, err, saga.ErrStartKeyConflict)

	_, err = h.sagas.Get(ctx, uuid.New())
	require.ErrorIs(t, err, saga.ErrNotFound)
	_, _, err = h.sagas.List(ctx, saga.ListFilter{State: "NAPPING"})
	require.ErrorContains(t, err, "unknown state")
	_, err = h.sagas.Resolve(ctx, uuid.New(), saga.MarkCompensated, "a", "b")
	require.ErrorIs(t, err, saga.ErrNotFound)
	_, err = saga.NewClient(nil, &saga.Config{})
	require.Error(t, err)
	uninstalled, err := saga.NewClient(h.pool, &saga.Config{})
	require.NoError(t, err)
	uninstalled.MustRegister(orderSaga(0))
	_, err = uninstalled.Start(ctx, "order", order{Account: "a-1", Amount: 5}, nil)
	require.ErrorIs(t, err, saga.ErrNotInstalled)
}

// A step that cannot be built once the saga runs fails it: the steps before are compensated.
func TestStepThatCannotBeBuiltCompensates(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	require.NoError(t, h.sagas.Register(saga.Definition{Name: "half", Steps: []saga.Step{
		orderSaga(0).Steps[0],
		{Name: "nowhere", Undo: saga.NoUndo(), Effect: func(saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: "no.such.connector"}, nil
		}},
	}}))
	require.NoError(t, h.sagas.Register(saga.Definition{Name: "panicky", Steps: []saga.Step{
		orderSaga(0).Steps[0],
		{Name: "boom", Undo: saga.NoUndo(), Effect: func(saga.Input) (effects.Spec, error) { panic("oops") }},
	}}))
	h.start(h.effects)
	s, err := h.sagas.Start(context.Background(), "half", order{Account: "a", Amount: 9}, nil)
	require.NoError(t, err)
	done := h.wait(s.ID)
	require.Equal(t, saga.StateCompensated, done.State)
	require.Contains(t, done.Error, "step 1 (nowhere) could not start")
	require.ErrorContains(t, errors.New(done.Error), "unknown connector")

	s, err = h.sagas.Start(context.Background(), "panicky", order{Account: "b", Amount: 4}, nil)
	require.NoError(t, err)
	done = h.wait(s.ID)
	require.Equal(t, saga.StateCompensated, done.State)
	require.Contains(t, done.Error, "step builder panicked: oops")
	require.Equal(t, int64(0), h.ledgerNet())
}

// A compensation whose outcome stays unknown becomes a STUCK effect and makes the saga STUCK; the
// operator resolves that effect and the saga finishes compensating in the same transaction.
func TestStuckCompensationIsResolvedOnItsEffect(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	h.start(h.effects)
	ctx := context.Background()

	s := h.begin(order{Account: "acct-1", Amount: 40}, func(id uuid.UUID) {
		// The refund times out on both of its attempts: nobody can tell whether it happened.
		h.bank.Script(saga.CompensationKey(id, 1, 1, false), fakebank.Timeout, fakebank.Timeout)
	})
	stuck := h.wait(s.ID)
	require.Equal(t, saga.StateStuck, stuck.State, stuck.Error)
	require.Equal(t, saga.StepCompensationStuck, stuck.Steps[1].State)
	refund := h.effect(*stuck.Steps[1].CompensationEffectID)
	require.Equal(t, effects.StateStuck, refund.State)
	_, err := h.sagas.Resolve(ctx, s.ID, saga.MarkCompensated, "alice", "x")
	require.ErrorIs(t, err, saga.ErrResolveEffect)

	_, err = h.effects.Resolve(ctx, refund.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "card processor shows the refund"}, nil)
	require.NoError(t, err)
	done := h.wait(s.ID)
	require.Equal(t, saga.StateCompensated, done.State)
	require.Contains(t, done.Error, "step 2 (ship) failed", "the failure is kept")
	require.Empty(t, done.StuckReason)
	require.Equal(t, int64(0), h.bank.Net(saga.StepKey(s.ID, 0)), "the reservation was released after the resolution")
	require.Equal(t, []string{">RUNNING", "RUNNING>COMPENSATING", "COMPENSATING>STUCK", "STUCK>COMPENSATING", "COMPENSATING>COMPENSATED"}, h.history(s.ID))
}

// Cancelling a step's effect before it is attempted (an operator's action in effects) fails the
// step through the same hook: the saga compensates what came before.
func TestCancelledStepCompensates(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	s, err := h.sagas.Start(ctx, "order", order{Account: "acct-1", Amount: 5, ShipAmount: 1}, nil)
	require.NoError(t, err)
	_, err = h.effects.Cancel(ctx, s.Steps[0].EffectID, "alice", "customer called it off", nil)
	require.NoError(t, err)
	got, err := h.sagas.Get(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, saga.StateCompensated, got.State, "nothing was confirmed, so nothing to undo")
	require.Equal(t, saga.StepFailed, got.Steps[0].State)
	require.Contains(t, got.Error, "cancelled: customer called it off")
	require.Empty(t, h.bank.Ledger())
}

// Two transactions start a saga under one start key at once: the one that loses the race gets
// ErrStartKeyConflict and, as documented, its transaction holds nothing of the start — no saga,
// and above all no first-step effect that would be dispatched for no saga — so committing it is
// safe.
func TestConcurrentStartKeyLeavesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	tx1, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx1.Rollback(ctx) }()
	_, err = h.sagas.StartTx(ctx, tx1, "order", order{Account: "k", Amount: 3}, &saga.StartOpts{Key: "order-7"})
	require.NoError(t, err)

	second := make(chan error, 1)
	go func() {
		second <- pgx.BeginFunc(ctx, h.pool, func(tx2 pgx.Tx) error {
			_, err := h.sagas.StartTx(ctx, tx2, "order", order{Account: "k", Amount: 3}, &saga.StartOpts{Key: "order-7"})
			if !errors.Is(err, saga.ErrStartKeyConflict) {
				return fmt.Errorf("second start: want ErrStartKeyConflict, got %v", err)
			}
			return nil // commit what is left in tx2: nothing
		})
	}()
	// The second start waits on the first's uncommitted start key.
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM pg_locks WHERE NOT granted`) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, tx1.Commit(ctx))
	require.NoError(t, <-second)

	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_sagas`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects e
		WHERE NOT EXISTS (SELECT 1 FROM reckon_saga_steps s WHERE s.effect_id = e.id)`), "no orphan step effect")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE job_id IS NULL AND state = 'PENDING'`),
		"the one step waits to be claimed")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch'`), "the refused start left no job")
}

// TestOnUnknownDefinition: a start naming an unregistered definition asks the fallback, in the
// start's transaction, and succeeds once the fallback registered it; a fallback that fails or
// registers nothing leaves the start refused and nothing written.
func TestOnUnknownDefinition(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	var asked []string
	var fail error
	loader := func(ctx context.Context, tx pgx.Tx, c *saga.Client, name string) error {
		asked = append(asked, name)
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil { // the caller's transaction
			return err
		}
		if fail != nil {
			return fail
		}
		if name == "order-copy" {
			def := orderSaga(0)
			def.Name = name
			return c.Register(def)
		}
		return nil
	}
	h.effects, h.sagas = h.newClientsWith(effectsConfig(h.registry), saga.Config{OnUnknownDefinition: loader}, 0)

	_, err := h.sagas.Start(ctx, "nothing-here", order{Account: "a-1", Amount: 5}, nil)
	require.ErrorIs(t, err, saga.ErrUnknownDefinition)
	fail = errors.New("database unreachable")
	_, err = h.sagas.Start(ctx, "order-copy", order{Account: "a-1", Amount: 5}, nil)
	require.ErrorContains(t, err, "database unreachable")
	require.False(t, h.sagas.Registered("order-copy"))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_sagas`))

	fail = nil
	s, err := h.sagas.Start(ctx, "order-copy", order{Account: "a-1", Amount: 5}, nil)
	require.NoError(t, err)
	require.Equal(t, "order-copy", s.Name)
	require.True(t, h.sagas.Registered("order-copy"))
	_, err = h.sagas.Start(ctx, "order", order{Account: "a-1", Amount: 5}, nil)
	require.NoError(t, err, "a registered definition never asks")
	require.Equal(t, []string{"nothing-here", "order-copy", "order-copy"}, asked)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_sagas`))
}
