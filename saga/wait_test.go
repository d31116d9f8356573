package saga_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/saga"
)

// Wait wakes on the saga's notification, through the effects client's listener: ten Waits hold
// no connection while they wait (the listener's is the only one taken), and each returns within
// 200ms of the saga settling. The listener waits on effects' channel first, so that it has to
// LISTEN on the sagas' channel while waiting.
func TestWaitWakesOnNotificationWithoutAConnection(t *testing.T) {
	h := setup(t, 1)
	s := h.begin(order{Account: "a-1", Amount: 10, ShipAmount: 10}, nil) // no reactor: stays RUNNING
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	effectWaitCtx, stopEffectWait := context.WithCancel(ctx)
	defer stopEffectWait()
	go func() { _, _ = h.effects.Wait(effectWaitCtx, s.Steps[0].EffectID) }()
	require.Eventually(t, func() bool { return h.pool.Stat().AcquiredConns() == 1 }, 5*time.Second, 10*time.Millisecond)

	const waiters = 10
	type result struct {
		s   *saga.Saga
		err error
		at  time.Time
	}
	results := make(chan result, waiters)
	for range waiters {
		go func() {
			s, err := h.sagas.Wait(ctx, s.ID)
			results <- result{s, err, time.Now()}
		}()
	}
	// Once every Wait has looked at the saga (well within a second, on a loaded machine: at 300ms
	// CI once caught a late first look), only the listener's connection is taken, and it stays so
	// while they wait.
	time.Sleep(time.Second)
	require.Eventually(t, func() bool { return h.pool.Stat().AcquiredConns() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Never(t, func() bool { return h.pool.Stat().AcquiredConns() != 1 }, 500*time.Millisecond, 10*time.Millisecond,
		"waiting sagas hold connections")

	_, err := h.pool.Exec(ctx, `UPDATE reckon_sagas SET state = 'STUCK', stuck_reason = 'test' WHERE id = $1`, s.ID)
	require.NoError(t, err)
	settled := time.Now()
	for range waiters {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, saga.StateStuck, r.s.State)
		require.Less(t, r.at.Sub(settled), 200*time.Millisecond, "woken late")
	}
}

// Wait needs the effects client the saga client is installed in.
func TestWaitNotInstalled(t *testing.T) {
	h := setup(t, 1)
	sc, err := saga.NewClient(h.pool, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = sc.Wait(ctx, h.begin(order{Account: "a-1", Amount: 10}, nil).ID)
	require.ErrorIs(t, err, saga.ErrNotInstalled)
}
