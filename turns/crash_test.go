package turns_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/turns"
)

// A process that holds a session is killed with SIGKILL in the middle of its turn's commit
// transaction (its staged note and refund already written in it): a waiter in another process
// acquires the session within a second of the death, nothing of the dead turn's commit exists, and
// the next run takes the turn over in the same turn group and commits it once.
func TestKilledHolderFreesSessionAndLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		if err := stageNote(turn, "retried turn"); err != nil {
			return err
		}
		return turn.Enqueue(refundSpec(turn, 0, 100))
	})})
	session := newSession("web")
	holder := h.startChild("hold", session)
	require.Eventually(t, func() bool { return holder.Logged("in commit") }, 30*time.Second, 10*time.Millisecond, holder.Stderr())
	records := h.turnsOf(session)
	require.Len(t, records, 1)
	dead := records[0]
	require.Equal(t, turns.StatusCommitting, dead.Status)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'idle in transaction'
		AND backend_xid IS NOT NULL`, dead.HolderPID), "the holder's commit transaction has written and is open")

	// A waiter of another process (a mutex of its own) is blocked on the session. It reports once,
	// on one channel, whether and when it acquired the session; its release comes after, on
	// another, so that no select below can see both at once.
	type acquireResult struct {
		at  time.Time
		err error
	}
	acquired := make(chan acquireResult, 1)
	released := make(chan error, 1)
	go func() {
		lock, err := turns.NewMutex(h.pool).Acquire(ctx, session, 30*time.Second)
		if err != nil {
			acquired <- acquireResult{err: err}
			return
		}
		acquired <- acquireResult{at: time.Now()}
		released <- lock.Release(ctx)
	}()
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND NOT granted`, turns.LockNamespace) == 1
	}, 10*time.Second, 5*time.Millisecond, "the waiter waits for the holder")
	select {
	case res := <-acquired:
		t.Fatalf("the waiter returned while the holder lives (error %v)", res.err)
	default:
	}

	killed := time.Now()
	holder.Signal(t, syscall.SIGKILL)
	holder.Wait(t, 10*time.Second)
	select {
	case res := <-acquired:
		require.NoError(t, res.err, "the waiter failed")
		require.Less(t, res.at.Sub(killed), time.Second, "acquired within a second of the death")
		t.Logf("acquired %v after SIGKILL", res.at.Sub(killed))
	case <-time.After(5 * time.Second):
		t.Fatal("the session was not freed")
	}
	require.NoError(t, <-released)

	// Nothing of the dead turn's commit exists.
	require.Equal(t, 0, h.count(`SELECT count(*) FROM app_notes`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE kind <> 'reckon_turn'`))
	stored, err := h.tc.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, turns.StatusCommitting, stored.Status, "the dead turn never completed")
	require.Nil(t, stored.CompletedAt)

	// The next run takes the abandoned turn over: same messages, same group, second attempt.
	result, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, result.Turn.Status)
	require.Equal(t, dead.Group, result.Turn.Group)
	require.Equal(t, 2, result.Turn.Attempt)
	require.Equal(t, "retry", result.Turn.AggregationReason)
	require.Equal(t, dead.MessageIDs, result.Turn.MessageIDs)
	require.Equal(t, []string{"hold-1"}, h.messageIDs(result.Turn.ID))
	stored, err = h.tc.Get(ctx, dead.ID)
	require.NoError(t, err)
	require.Equal(t, turns.StatusSuperseded, stored.Status)
	require.Equal(t, result.Turn.ID, *stored.SupersededBy)
	require.Contains(t, stored.StatusReason, "abandoned")

	require.Len(t, result.Effects, 1)
	require.Equal(t, dead.Group.String()+"/d-0/bank.refund/0", result.Effects[0].IdempotencyKey)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM app_notes WHERE turn_id = $1`, result.Turn.ID))
}
