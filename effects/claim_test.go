package effects_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// rowLocked reports whether a transaction holds the effect's row (FOR UPDATE NOWAIT fails).
func (h *harness) rowLocked(id uuid.UUID) bool {
	h.t.Helper()
	err := h.inTx(func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `SELECT 1 FROM reckon_effects WHERE id = $1 FOR UPDATE NOWAIT`, id)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		return true
	}
	require.NoError(h.t, err)
	return false
}

// requireDispatchedOnceByNewReactor starts a reactor process, which must confirm the effect with
// nothing in its audit trail but the insert and the outcome, the bank having performed key once.
func (h *harness) requireDispatchedOnceByNewReactor(id uuid.UUID, key string) {
	h.t.Helper()
	reactor := h.startChild()
	require.Equal(h.t, effects.StateConfirmed, h.wait(id).State, reactor.Stderr())
	require.Equal(h.t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(id))
	require.Equal(h.t, 1, h.bank.Count(key), "performed exactly once")
	reactor.Signal(h.t, syscall.SIGTERM)
	require.Equal(h.t, 0, reactor.Wait(h.t, 15*time.Second), reactor.Stderr())
}

// TestClaimCrashWindows kills a real reactor process with SIGKILL in each window that claiming
// adds to the dispatch protocol (docs/design.md, "Claiming"); a new reactor then dispatches the
// effect exactly once, and its audit trail shows nothing but the insert and the outcome.
func TestClaimCrashWindows(t *testing.T) {
	t.Parallel()
	t.Run("in the claiming transaction", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
		ctx := context.Background()
		key := fmt.Sprintf("claim-tx-%d", time.Now().UnixNano())
		first := h.startChild()

		// Holding river_job against inserts stops the claimer between locking the effect and
		// inserting its job.
		blocker, err := h.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = blocker.Rollback(ctx) }()
		_, err = blocker.Exec(ctx, `LOCK TABLE river_job IN SHARE ROW EXCLUSIVE MODE`)
		require.NoError(t, err)
		effect := h.enqueue("bank.wire", key, 500)
		require.Eventually(t, func() bool {
			return h.rowLocked(effect.ID) && h.count(`SELECT count(*) FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query ILIKE '%insert%river_job%'`) > 0
		}, 30*time.Second, 10*time.Millisecond, "the claimer never reached the job insert\n%s", first.Stderr())

		first.Signal(t, syscall.SIGKILL)
		first.Wait(t, 10*time.Second)
		require.NoError(t, blocker.Commit(ctx))
		// The dead reactor's session ends with its transaction rolled back: the effect is
		// unclaimed again and no job of it was left.
		require.Eventually(t, func() bool { return !h.rowLocked(effect.ID) }, 30*time.Second, 10*time.Millisecond)
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE id = $1 AND job_id IS NULL AND state = 'PENDING'`, effect.ID))
		require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch'`))

		h.requireDispatchedOnceByNewReactor(effect.ID, key)
	})
	t.Run("after the claim committed, before a fetch", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
		key := fmt.Sprintf("claim-commit-%d", time.Now().UnixNano())
		first := h.startChild("CHILD_FETCH_PAUSE=10m") // it claims, but fetches nothing more

		effect := h.enqueue("bank.wire", key, 500)
		require.Eventually(t, func() bool {
			return h.count(`SELECT count(*) FROM reckon_effects e JOIN river_job j ON j.id = e.job_id
				WHERE e.id = $1 AND j.state = 'available'`, effect.ID) == 1
		}, 30*time.Second, 10*time.Millisecond, "the claimer never claimed\n%s", first.Stderr())
		first.Signal(t, syscall.SIGKILL)
		first.Wait(t, 10*time.Second)
		require.Equal(t, 0, h.bank.Count(key))

		h.requireDispatchedOnceByNewReactor(effect.ID, key)
	})
}

// Effects enqueued one per transaction while no reactor runs are claimed together: one dispatch
// job per DispatchBatch of them. An effect enqueued alone afterwards gets a job of its own at once
// instead of waiting for others.
func TestClaimSharesJobs(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	enqueued := make([]*effects.Effect, 40)
	for i := range enqueued {
		enqueued[i] = h.enqueue("bank.wire", fmt.Sprintf("shared-%d", i), 1)
	}
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job`), "no job before a claim")

	h.start()
	for _, e := range enqueued {
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
		require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(e.ID))
	}
	require.Equal(t, []int{16, 16, 8}, h.dispatchJobs(), "claimed in one transaction, DispatchBatch to a job")
	count, sum, ok := testkit.Histogram(t, h.metrics, "reckon_effect_claim_batch_size", nil)
	require.True(t, ok)
	require.Equal(t, uint64(1), count)
	require.Equal(t, 40.0, sum)

	lone := h.enqueue("bank.wire", "lone", 1)
	require.Equal(t, effects.StateConfirmed, h.wait(lone.ID).State)
	require.Equal(t, []int{16, 16, 8, 1}, h.dispatchJobs(), "the lone effect did not wait for company")
	require.Equal(t, 41, h.bank.Calls("/wires"))
}

// The sweeper leaves an effect waiting to be claimed alone, however old: it has no job because
// none was ever made, not because one was lost.
func TestSweeperLeavesUnclaimedEffects(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	waiting := h.enqueue("bank.wire", "waiting", 1)
	lost := h.enqueueWithJob("bank.wire", "lost", 1)
	_, err := h.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'reckon_dispatch'`)
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `UPDATE reckon_effects SET updated_at = now() - interval '1 hour'`)
	require.NoError(t, err)

	// A reactor of another queue sweeps (sweeping covers every queue) but claims only its own.
	config := testkit.FastConfig(h.registry)
	config.Queue = "elsewhere"
	testkit.Start(t, testkit.NewClient(t, h.pool, config))
	require.Eventually(t, func() bool { return h.state(lost.ID) != effects.StatePending }, 30*time.Second, 20*time.Millisecond,
		"the effect whose job was lost is swept")
	require.Equal(t, effects.StatePending, h.state(waiting.ID))
	require.Equal(t, []string{">PENDING"}, h.path(waiting.ID))

	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(waiting.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(waiting.ID))
}

// An effect waiting to be claimed can be cancelled, alone or with its run, and is never sent.
func TestCancelUnclaimed(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	alone := h.enqueue("bank.wire", "alone", 1)
	inRun, err := h.client.Enqueue(ctx, wireSpec("in-run", "r-unclaimed"), nil)
	require.NoError(t, err)

	cancelled, err := h.client.Cancel(ctx, alone.ID, "carol", "withdrawn", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, cancelled.State)
	_, err = h.client.Cancel(ctx, alone.ID, "carol", "again", nil)
	require.ErrorIs(t, err, effects.ErrNotCancellable)
	res, err := h.client.CancelRun(ctx, "r-unclaimed", "alice", "user aborted", nil)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{inRun.ID}, res.Failed)
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(alone.ID))
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(inRun.ID))

	h.start()
	after := h.wait(h.enqueue("bank.wire", "after", 1).ID)
	require.Equal(t, effects.StateConfirmed, after.State)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects WHERE id = ANY($1) AND job_id IS NOT NULL`,
		[]uuid.UUID{alone.ID, inRun.ID}), "never claimed")
	require.Equal(t, 1, h.bank.Calls("/wires"), "only the effect enqueued after was sent")
}

func TestClaimIntervalIsValidated(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, interval := range []time.Duration{-time.Millisecond, time.Microsecond, 2 * time.Second} {
		config := testkit.FastConfig(h.registry)
		config.ClaimInterval = interval
		_, err := effects.NewClient(h.pool, config)
		require.ErrorContains(t, err, "Config.ClaimInterval must be between 1ms and 1s", "%v", interval)
	}
}
