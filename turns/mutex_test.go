package turns_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

func TestMutexExcludesAndTimesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mutex := turns.NewMutex(pgtest.NewDB(t))
	session := newSession("web")

	held, err := mutex.Acquire(ctx, session, time.Second)
	require.NoError(t, err)
	require.Equal(t, session, held.SessionKey())

	began := time.Now()
	_, err = mutex.Acquire(ctx, session, 300*time.Millisecond)
	require.ErrorIs(t, err, turns.ErrSessionBusy)
	require.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond, "the acquire blocked for its timeout")

	other, err := mutex.Acquire(ctx, newSession("web"), time.Second)
	require.NoError(t, err, "another session is independent")
	require.NoError(t, other.Release(ctx))

	// A blocked acquirer gets the lock when the holder releases.
	acquired := make(chan error, 1)
	go func() {
		lock, err := mutex.Acquire(ctx, session, 30*time.Second)
		if err == nil {
			err = lock.Release(ctx)
		}
		acquired <- err
	}()
	select {
	case err := <-acquired:
		t.Fatalf("acquired while held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, held.Release(ctx))
	require.NoError(t, <-acquired)
	require.NoError(t, held.Release(ctx), "a second release does nothing")
}

func TestMutexFreedWhenHolderConnectionDies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	mutex := turns.NewMutex(pool)
	session := newSession("sms")
	held, err := mutex.Acquire(ctx, session, time.Second)
	require.NoError(t, err)
	var pid int
	require.NoError(t, held.Conn().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))

	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	// Another process: this one's waiters queue behind held until it is released.
	lock, err := turns.NewMutex(pool).Acquire(ctx, session, 5*time.Second)
	require.NoError(t, err, "Postgres freed the dead connection's lock")
	require.NoError(t, lock.Release(ctx))
	require.Error(t, held.Release(ctx), "the dead holder learns it lost the lock")
}

func TestMutexRejectsBadInput(t *testing.T) {
	t.Parallel()
	mutex := turns.NewMutex(pgtest.NewDB(t))
	_, err := mutex.Acquire(context.Background(), "", time.Second)
	require.ErrorIs(t, err, turns.ErrInvalidSessionKey)
	_, err = mutex.Acquire(context.Background(), "a:b:c:d", 0)
	require.Error(t, err)
	require.False(t, errors.Is(err, turns.ErrSessionBusy))
}

// Holders shows who holds a session (with its turn) and who waits, from pg_locks.
func TestHolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inHandler, finish := make(chan struct{}), make(chan struct{})
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		close(inHandler)
		<-finish
		return nil
	})})
	session := newSession("web")
	h.submit(session, "m1")
	done := make(chan error, 1)
	go func() {
		_, err := h.tc.RunTurn(ctx, session)
		done <- err
	}()
	<-inHandler
	var once sync.Once
	release := func() { once.Do(func() { close(finish) }) }
	t.Cleanup(release) // a failing assertion must not leave the handler holding a connection

	// A waiter with a mutex of its own, as another process would be.
	waiting := make(chan error, 1)
	go func() {
		lock, err := turns.NewMutex(h.pool).Acquire(ctx, session, 30*time.Second)
		if err == nil {
			err = lock.Release(ctx)
		}
		waiting <- err
	}()
	var holders []turns.Holder
	require.Eventually(t, func() bool {
		var err error
		holders, err = h.tc.Holders(ctx)
		require.NoError(t, err)
		return len(holders) == 2
	}, 10*time.Second, 20*time.Millisecond, "a holder and a waiter")
	require.True(t, holders[0].Granted)
	require.Equal(t, session, holders[0].SessionKey)
	require.Equal(t, turns.StatusProcessing, holders[0].Status)
	require.Equal(t, h.tc.ID(), holders[0].Holder)
	records := h.turnsOf(session)
	require.Equal(t, records[0].ID, *holders[0].TurnID)
	require.Equal(t, records[0].HolderPID, holders[0].PID)
	require.False(t, holders[1].Granted)
	require.Nil(t, holders[1].TurnID)

	release()
	require.NoError(t, <-done)
	require.NoError(t, <-waiting)
	holders, err := h.tc.Holders(ctx)
	require.NoError(t, err)
	require.Empty(t, holders)
}
