package effects_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// enqueueMany records one effect per key of connector in one transaction (EnqueueManyTx).
func (h *harness) enqueueMany(connector string, keys ...string) []*effects.Effect {
	h.t.Helper()
	specs := make([]effects.Spec, len(keys))
	for i, key := range keys {
		specs[i] = effects.Spec{Connector: connector, IdempotencyKey: key, Args: map[string]any{"account": "acct-1", "amount": 10}}
	}
	return h.enqueueSpecs(specs)
}

// enqueueSpecs records specs in one transaction (EnqueueManyTx).
func (h *harness) enqueueSpecs(specs []effects.Spec) []*effects.Effect {
	h.t.Helper()
	var out []*effects.Effect
	require.NoError(h.t, h.inTx(func(tx pgx.Tx) error {
		var err error
		out, err = h.client.EnqueueManyTx(context.Background(), tx, specs, nil)
		return err
	}))
	return out
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// dispatchJobs returns, per dispatch job, how many effects it carries, in job order.
func (h *harness) dispatchJobs() []int {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT CASE WHEN args ? 'effect_ids' THEN jsonb_array_length(args->'effect_ids') ELSE 1 END
		FROM river_job WHERE kind = 'reckon_dispatch' ORDER BY id`)
	require.NoError(h.t, err)
	sizes, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(h.t, err)
	return sizes
}

// TestBatchJobOutcomes sends one batch job through every outcome at once: each effect of the batch
// is called concurrently, settles on its own (a hanging call holds up nobody: the others are
// recorded before it times out), and is recorded exactly as with a job of its own; a retryable
// effect moves to a job of its own.
func TestBatchJobOutcomes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Timeout: 5 * time.Second})
	ks := keys("batch", 40) // 16 share the first job, 16 the second, 8 the third
	h.bank.Script("batch-1", fakebank.Reject)
	h.bank.Script("batch-2", fakebank.Unavailable, fakebank.Succeed)
	h.bank.Script("batch-3", fakebank.PerformThenDrop)
	h.bank.Script("batch-4", fakebank.Timeout, fakebank.Succeed)
	batch := h.enqueueMany("bank.wire", ks...)
	require.Equal(t, []int{16, 16, 8}, h.dispatchJobs(), "effects enqueued together share dispatch jobs of up to DispatchBatch")
	h.start()

	for i, e := range batch {
		done := h.wait(e.ID)
		key := ks[i]
		switch i {
		case 1:
			require.Equal(t, effects.StateFailed, done.State)
			require.Equal(t, 0, h.bank.Count(key))
		case 2:
			require.Equal(t, effects.StateConfirmed, done.State)
			require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(e.ID))
			require.Equal(t, 2, done.Attempts, "the retry is a second attempt")
		case 3:
			require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(e.ID), "performed, answer lost: the status check decides")
		case 4:
			require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(e.ID), "timed out, absent upstream: dispatched again")
		default:
			require.Equal(t, effects.StateConfirmed, done.State)
			require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(e.ID))
		}
		if i != 1 {
			require.Equal(t, 1, h.bank.Count(key), "key %s performed exactly once", key)
		}
	}
	// The plain successes of the first batch were recorded before the hanging call timed out.
	var beforeHangEnded bool
	require.NoError(t, h.pool.QueryRow(context.Background(), `
		SELECT (SELECT max(at) FROM reckon_effect_transitions WHERE to_state = 'CONFIRMED' AND effect_id = ANY ($1))
		     < (SELECT at FROM reckon_effect_transitions WHERE to_state = 'UNKNOWN' AND effect_id = $2)`,
		[]uuid.UUID{batch[0].ID, batch[6].ID, batch[10].ID, batch[15].ID}, batch[4].ID).Scan(&beforeHangEnded))
	require.True(t, beforeHangEnded, "the other effects of the batch did not wait for the hanging call")

	// The batch jobs completed; the retried effect had a job of its own, and so had the
	// redispatch after the status check.
	require.Equal(t, []int{16, 16, 8, 1, 1}, h.dispatchJobs())
	require.Eventually(t, func() bool { // River's completer writes a batch job's completion after Work
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch' AND state <> 'completed'`) == 0
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 40+1+1, h.bank.Calls("/wires"), "one call per effect, plus the retry and the redispatch after an absent status")
}

// TestBatchJobCrash kills a reactor process while one effect of a batch job is in flight after the
// upstream performed it: the rest of the batch was recorded, and a new reactor resolves the
// interrupted effect by its status check, never calling it twice.
func TestBatchJobCrash(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
	ks := keys(fmt.Sprintf("crash-batch-%d", time.Now().UnixNano()), 6)
	held := h.bank.ArmKey("after-call", ks[2])

	first := h.startChild()
	batch := h.enqueueMany("bank.wire", ks...)
	require.Equal(t, []int{6}, h.dispatchJobs())
	select {
	case got := <-held:
		require.Equal(t, ks[2], got)
	case <-time.After(30 * time.Second):
		t.Fatalf("the reactor never reached the crash point\n%s", first.Stderr())
	}
	for i, e := range batch {
		if i != 2 {
			require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
		}
	}
	first.Signal(t, syscall.SIGKILL)
	first.Wait(t, 10*time.Second)
	stored, err := h.client.Get(context.Background(), batch[2].ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, stored.State, "the dead reactor recorded nothing for the held effect")

	second := h.startChild()
	done := h.wait(batch[2].ID)
	require.Equal(t, effects.StateConfirmed, done.State, second.Stderr())
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(batch[2].ID))
	for _, key := range ks {
		require.Equal(t, 1, h.bank.Count(key), "key %s performed exactly once", key)
	}
	second.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
}

// TestBatchJobCancel cancels one effect of a batch job that has not started: the job is not
// cancelled with it, its other effects are dispatched, and the cancelled one is never called.
func TestBatchJobCancel(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	batch := h.enqueueMany("bank.wire", keys("cancel", 3)...)
	cancelled, err := h.client.Cancel(context.Background(), batch[1].ID, "ops", "not wanted", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, cancelled.State)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch' AND state = 'available'`),
		"the batch job still carries the other effects")

	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(batch[0].ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(batch[2].ID).State)
	require.Equal(t, 0, h.bank.Count("cancel-1"))
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(batch[1].ID))
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch' AND state = 'completed'`) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, h.bank.Calls("/wires"))
}

// TestBatchJobDeduplicated enqueues a batch again, then a batch with one new key: duplicates get
// no job (a batch whose every effect existed is deleted), and the new effect is dispatched once.
func TestBatchJobDeduplicated(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	first := h.enqueueMany("bank.wire", "dup-0", "dup-1", "dup-2")
	again := h.enqueueMany("bank.wire", "dup-0", "dup-1", "dup-2")
	for i := range again {
		require.True(t, again[i].Deduplicated)
		require.Equal(t, first[i].ID, again[i].ID)
	}
	require.Equal(t, []int{3}, h.dispatchJobs(), "the job inserted for duplicates only was deleted")
	mixed := h.enqueueMany("bank.wire", "dup-1", "dup-3")
	require.True(t, mixed[0].Deduplicated)
	require.False(t, mixed[1].Deduplicated)
	require.Equal(t, []int{3, 2}, h.dispatchJobs(), "a batch with one new effect keeps its job; the duplicate's id names no effect")

	h.start()
	for _, e := range append(first, mixed[1]) {
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
	}
	for _, key := range []string{"dup-0", "dup-1", "dup-2", "dup-3"} {
		require.Equal(t, 1, h.bank.Count(key))
	}
}

// TestBatchJobUnknownConnector works a batch with a reactor that lacks one of its connectors: the
// effects it can dispatch are, and the other is handed to a job of its own that waits for a
// reactor that has the connector, without being called.
func TestBatchJobUnknownConnector(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.wire(fakebank.ConnectorOptions{Name: "bank.other", StatusCheck: true})
	specs := []effects.Spec{
		{Connector: "bank.other", IdempotencyKey: "o-1", Args: map[string]any{"account": "a", "amount": 1}},
		{Connector: "bank.wire", IdempotencyKey: "w-1", Args: map[string]any{"account": "a", "amount": 1}},
		{Connector: "bank.other", IdempotencyKey: "o-2", Args: map[string]any{"account": "a", "amount": 1}},
	}
	batch := h.enqueueSpecs(specs)

	// A reactor with bank.other only.
	partial := effects.NewRegistry()
	require.NoError(t, partial.Register(fakebank.ConnectorOptions{Name: "bank.other", BaseURL: h.bank.URL(), StatusCheck: true}.Connector()))
	reactor, err := effects.NewClient(h.pool, testkit.FastConfig(partial))
	require.NoError(t, err)
	require.NoError(t, reactor.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, reactor.Stop(context.Background())) })

	require.Equal(t, effects.StateConfirmed, h.wait(batch[0].ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(batch[2].ID).State)
	var (
		state     string
		ownJob    bool
		waitsLong bool
	)
	require.Eventually(t, func() bool {
		err := h.pool.QueryRow(context.Background(), `SELECT e.state::text, j.args ? 'effect_id', j.scheduled_at > now() + interval '20 seconds'
			FROM reckon_effects e JOIN river_job j ON j.id = e.job_id WHERE e.id = $1`, batch[1].ID).Scan(&state, &ownJob, &waitsLong)
		require.NoError(t, err)
		return ownJob
	}, 10*time.Second, 20*time.Millisecond, "the effect was handed to a job of its own")
	require.Equal(t, "PENDING", state)
	require.True(t, waitsLong, "its job waits for a reactor that has the connector")
	require.Equal(t, 0, h.bank.Count("w-1"))
	require.Equal(t, []string{">PENDING"}, h.path(batch[1].ID), "handing over is not a transition")
}

// TestBatchJobHookFailure fails (by a panic) the settle hook of one effect of a batch: the failure
// rolls that effect's outcome back and fails the job, whose next run (attempt 2) dispatches the
// idempotent effect again, which then settles; its sibling settled in the first run.
func TestBatchJobHookFailure(t *testing.T) {
	t.Parallel()
	var panicked atomic.Bool
	h := setup(t, func(c *effects.Config) {
		c.Plugins = []effects.Plugin{effects.OnSettle("boom", func(_ context.Context, _ pgx.Tx, e *effects.Effect) error {
			if e.IdempotencyKey == "panic-1" && panicked.CompareAndSwap(false, true) {
				panic("hook exploded")
			}
			return nil
		})}
	})
	h.bank.SetIdempotent(true)
	h.wire(fakebank.ConnectorOptions{Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}})
	specs := []effects.Spec{
		{Connector: "bank.wire", IdempotencyKey: "panic-0", Owner: "boom", Args: map[string]any{"account": "a", "amount": 1}},
		{Connector: "bank.wire", IdempotencyKey: "panic-1", Owner: "boom", Args: map[string]any{"account": "a", "amount": 1}},
	}
	batch := h.enqueueSpecs(specs)
	require.Equal(t, []int{2}, h.dispatchJobs())
	h.start()
	for _, e := range batch {
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
	}
	require.True(t, panicked.Load())
	require.Equal(t, 2, h.count(`SELECT attempt FROM river_job WHERE kind = 'reckon_dispatch'`), "the hook's failure failed the job's first run")
	require.Equal(t, 1, h.bank.Count("panic-0"))
	require.Equal(t, 1, h.bank.Count("panic-1"), "the idempotent upstream performed the repeated call once")
}
