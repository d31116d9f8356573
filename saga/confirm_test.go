package saga_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
)

// heldSaga reserves inventory, then charges a card only once a person confirms the charge.
func heldSaga() saga.Definition {
	return saga.Definition{
		Name: "held-order",
		Steps: []saga.Step{
			{
				Name: "reserve",
				Effect: func(saga.Input) (effects.Spec, error) {
					return effects.Spec{Connector: "inventory.reserve", Args: map[string]any{"account": "acct-1", "amount": 40}}, nil
				},
				Undo: saga.UndoByConnector(),
			},
			{
				Name: "charge",
				Effect: func(saga.Input) (effects.Spec, error) {
					return effects.Spec{Connector: "card.charge", RequireConfirmation: true, Args: map[string]any{"account": "acct-1", "amount": 40}}, nil
				},
				Undo: saga.NoUndo(),
			},
		},
	}
}

// awaitHeldStep waits until the saga's second step is enqueued, awaiting its confirmation, and
// the saga with it; it returns the step's effect.
func (h *harness) awaitHeldStep(id uuid.UUID) uuid.UUID {
	h.t.Helper()
	var effectID uuid.UUID
	require.Eventually(h.t, func() bool {
		s, err := h.sagas.Get(context.Background(), id)
		require.NoError(h.t, err)
		if len(s.Steps) < 2 {
			return false
		}
		effectID = s.Steps[1].EffectID
		return h.effect(effectID).Confirmation == effects.ConfirmationAwaiting
	}, 30*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // the reactor has every chance to (wrongly) go on
	s, err := h.sagas.Get(context.Background(), id)
	require.NoError(h.t, err)
	require.Equal(h.t, saga.StateRunning, s.State, "the step awaiting its confirmation holds the saga")
	require.Equal(h.t, effects.StatePending, h.effect(effectID).State)
	return effectID
}

// A saga step awaiting its confirmation holds the saga: confirmed, the saga completes; declined,
// the saga compensates the steps before it.
func TestSagaStepAwaitingConfirmation(t *testing.T) {
	t.Parallel()
	h := setup(t, 3)
	require.NoError(t, h.sagas.Register(heldSaga()))
	h.start(h.effects)
	ctx := context.Background()
	start := func(key string) uuid.UUID {
		s, err := h.sagas.Start(ctx, "held-order", map[string]string{"order": key}, &saga.StartOpts{Key: key})
		require.NoError(t, err)
		return s.ID
	}

	confirmed := start("o-confirm")
	charge := h.awaitHeldStep(confirmed)
	_, err := h.effects.Confirm(ctx, charge, "alice", "card holder confirmed", nil)
	require.NoError(t, err)
	require.Equal(t, saga.StateCompleted, h.wait(confirmed).State)

	declined := start("o-decline")
	charge = h.awaitHeldStep(declined)
	_, err = h.effects.Decline(ctx, charge, "bob", "card holder refused", nil)
	require.NoError(t, err)
	done := h.wait(declined)
	require.Equal(t, saga.StateCompensated, done.State)
	require.Contains(t, done.Error, "declined: card holder refused")
	require.NotNil(t, done.Steps[0].CompensationEffectID, "the reservation was undone")
	require.Equal(t, effects.StateConfirmed, h.effect(*done.Steps[0].CompensationEffectID).State)
}
