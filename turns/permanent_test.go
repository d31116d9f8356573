package turns_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns"
)

// A handler's Permanent error ends the turn FAILED at once, with the error as its reason: nothing
// staged is committed, no further attempt is made, and the messages stay recorded.
func TestPermanentHandlerErrorFailsTheTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls atomic.Int32
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		calls.Add(1)
		if err := stageNote(turn, "staged"); err != nil {
			return err
		}
		if err := turn.Enqueue(refundSpec(turn, 0, 10)); err != nil {
			return err
		}
		return effects.Permanent(fmt.Errorf("handler answered 422: %w", errors.New("unknown product")))
	})})
	session := newSession("web")
	h.submit(session, "m1")

	result, err := h.tc.RunTurn(ctx, session)
	require.ErrorIs(t, err, turns.ErrTurnFailed)
	require.ErrorContains(t, err, "unknown product")
	require.True(t, effects.IsPermanent(err))
	require.Equal(t, turns.StatusFailed, result.Turn.Status)
	require.Contains(t, result.Turn.StatusReason, "handler answered 422: unknown product")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM app_notes`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, []string{"m1"}, h.messageIDs(result.Turn.ID), "the messages stay, with the failed turn")
	require.Equal(t, 1.0, h.metric("reckon_turn_ended_total", map[string]string{"status": "FAILED"}))

	_, err = h.tc.RunTurn(ctx, session)
	require.ErrorIs(t, err, turns.ErrNoTurn, "no further attempt")
	require.Equal(t, int32(1), calls.Load())
	require.Nil(t, effects.Permanent(nil))
}

// readyHandler is a Readier whose readiness the test switches.
type readyHandler struct {
	ready   atomic.Bool
	asked   atomic.Int32
	handled atomic.Int32
}

func (r *readyHandler) Ready(context.Context, string) error {
	r.asked.Add(1)
	if !r.ready.Load() {
		return fmt.Errorf("%w: no turn handler configured for tenant acme", turns.ErrNotReady)
	}
	return nil
}

func (r *readyHandler) HandleTurn(context.Context, *turns.Turn) error {
	r.handled.Add(1)
	return nil
}

// A Readier that is not ready leaves the turn ACCUMULATING with its messages: the job snoozes and
// asks again, spends no attempt, drops nothing, and processes the turn once the handler is ready.
func TestNotReadyHandlerLeavesTheTurnWaiting(t *testing.T) {
	t.Parallel()
	handler := &readyHandler{}
	h := setup(t, turns.Config{
		Handler: handler, NotReadyDelay: 50 * time.Millisecond,
		Policies: map[string]turns.ChannelPolicy{"chat": {Mode: turns.AggregationOff}},
	})
	h.start()
	session := newSession("chat")
	h.submit(session, "m1")

	require.Eventually(t, func() bool { return handler.asked.Load() >= 3 }, 20*time.Second, 10*time.Millisecond, "the job asks again")
	_, err := h.tc.RunTurn(context.Background(), session)
	require.ErrorIs(t, err, turns.ErrNotReady)
	records := h.turnsOf(session)
	require.Len(t, records, 1)
	require.Equal(t, turns.StatusAccumulating, records[0].Status)
	require.Equal(t, 1, records[0].Attempt, "no attempt spent")
	require.Equal(t, []string{"m1"}, h.messageIDs(records[0].ID))
	require.Equal(t, int32(0), handler.handled.Load())
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn' AND state IN ('scheduled', 'available', 'running')`), "the job waits")

	handler.ready.Store(true)
	h.awaitTurns(session, 1)
	require.Equal(t, int32(1), handler.handled.Load())
}
