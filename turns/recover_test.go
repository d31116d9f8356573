package turns_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/turns"
)

// Recover runs again the turns whose holder gave up (here: a failed handler) and leaves alone the
// sessions whose holder still works.
func TestRecoverAbandonedTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	var failOnce atomic.Bool
	failOnce.Store(true)
	busy, broken := newSession("web"), newSession("web")
	h := setup(t, turns.Config{RecoverInterval: -1, Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		if turn.SessionKey == busy {
			close(held)
			<-release
			return nil
		}
		if failOnce.Swap(false) {
			return errors.New("transient")
		}
		return nil
	})})
	h.submit(busy, "b1")
	h.submit(broken, "x1")
	_, err := h.tc.RunTurn(ctx, broken)
	require.ErrorContains(t, err, "transient")
	done := make(chan error, 1)
	go func() {
		_, err := h.tc.RunTurn(ctx, busy)
		done <- err
	}()
	<-held
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	ran, err := h.tc.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ran, "only the abandoned session")
	records := h.turnsOf(broken)
	require.Len(t, records, 2)
	require.Equal(t, turns.StatusSuperseded, records[0].Status)
	require.Equal(t, turns.StatusComplete, records[1].Status)
	require.Equal(t, records[0].Group, records[1].Group)
	require.Equal(t, turns.StatusProcessing, h.turnsOf(busy)[0].Status, "the live holder's turn is untouched")

	close(release)
	require.NoError(t, <-done)
	ran, err = h.tc.Recover(ctx)
	require.NoError(t, err)
	require.Zero(t, ran)
}

// A started reactor runs Recover periodically — its turns client's ticker, a service of the effects
// client, from Start, and the leader's periodic job: a turn whose handler failed completes without
// a new message.
func TestPeriodicRecover(t *testing.T) {
	t.Parallel()
	var failOnce atomic.Bool
	failOnce.Store(true)
	h := setup(t, turns.Config{RecoverInterval: 200 * time.Millisecond, Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		if failOnce.Swap(false) {
			return errors.New("transient")
		}
		return nil
	})})
	session := newSession("web")
	h.submit(session, "m1")
	_, err := h.tc.RunTurn(context.Background(), session)
	require.ErrorContains(t, err, "transient")
	// Without its aggregation job, only the periodic recovery can run the turn again.
	_, err = h.pool.Exec(context.Background(), `DELETE FROM river_job WHERE kind = 'reckon_turn'`)
	require.NoError(t, err)
	h.start()
	h.awaitTurns(session, 2)
	// The ticker, which runs from Start, may have recovered the turn before the leader was elected.
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn_recover'`) >= 1
	}, 30*time.Second, 20*time.Millisecond, "the periodic job ran")
	require.Zero(t, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn'`), "no aggregation job did it")
}
