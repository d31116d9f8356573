package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// The upstream performs, then drops the connection: UNKNOWN, the status check finds it present,
// CONFIRMED with the upstream's result. Exactly one wire.
func TestDroppedAfterPerformingIsConfirmedByStatusCheck(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	h.bank.Script("drop-1", fakebank.PerformThenDrop)

	effect := h.wait(h.enqueue("bank.wire", "drop-1", 700).ID)
	require.Equal(t, effects.StateConfirmed, effect.State)
	require.JSONEq(t, `{"wire_id":"w-1","key":"drop-1","amount":700}`, string(effect.Result))
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 1, h.bank.Count("drop-1"))
	require.Equal(t, 1, h.bank.Calls("/wires"), "never a blind second call")
}

// The upstream times out without performing: UNKNOWN, absent, dispatched again, CONFIRMED.
// Exactly one wire.
func TestTimeoutWithoutPerformingIsRedispatched(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Timeout: 300 * time.Millisecond})
	h.start()
	h.bank.Script("slow-1", fakebank.Timeout)

	effect := h.wait(h.enqueue("bank.wire", "slow-1", 50).ID)
	require.Equal(t, effects.StateConfirmed, effect.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 2, effect.Attempts)
	require.Equal(t, 1, h.bank.Count("slow-1"))
	require.Equal(t, 2, h.bank.Calls("/wires"))
}

// The upstream performed twice: CONFIRMED, plus a compensation for the extra that is itself
// CONFIRMED; the ledger nets to one wire.
func TestDuplicateIsConfirmedAndCompensated(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true})
	h.start()
	h.bank.Script("dup-1", fakebank.PerformTwiceThenDrop)

	effect := h.wait(h.enqueue("bank.wire", "dup-1", 40).ID)
	require.Equal(t, effects.StateConfirmed, effect.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(effect.ID))

	compensations, _, err := h.client.List(context.Background(), effects.ListFilter{Connector: "bank.wire"})
	require.NoError(t, err)
	var compensation *effects.Effect
	for _, e := range compensations {
		if e.CompensatesID != nil {
			compensation = e
		}
	}
	require.NotNil(t, compensation, "a compensation was enqueued")
	require.Equal(t, effect.ID, *compensation.CompensatesID)
	require.Equal(t, "dup-1/compensate-duplicate-2", compensation.IdempotencyKey)
	require.Equal(t, effects.StateConfirmed, h.wait(compensation.ID).State)
	require.Equal(t, 2, h.bank.Count("dup-1"))
	require.Equal(t, int64(40), h.bank.Net("dup-1"), "two wires and one reversal net to one wire")
	require.Eventually(t, func() bool {
		return h.metric("reckon_effect_compensations_total", map[string]string{"connector": "bank.wire"}) == 1
	}, 5*time.Second, 10*time.Millisecond)
}

// Inconclusive status checks: STUCK after the limit; an operator's resolution finishes it, with the
// operator named in the audit trail.
func TestInconclusiveBecomesStuckAndOperatorResolves(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, StatusCheckLimit: 3})
	h.start()
	ctx := context.Background()
	for _, key := range []string{"fog-1", "fog-2"} {
		h.bank.Script(key, fakebank.PerformThenDrop)
		h.bank.ScriptStatus(key, fakebank.StatusInconclusive, fakebank.StatusInconclusive, fakebank.StatusInconclusive)
	}

	first := h.wait(h.enqueue("bank.wire", "fog-1", 10).ID)
	require.Equal(t, effects.StateStuck, first.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK"}, h.path(first.ID))
	require.Equal(t, 3, h.bank.Calls("/wires/status"), "three checks, then STUCK")

	_, err := h.client.Resolve(ctx, first.ID, effects.Resolution{To: effects.StateUnknown, Actor: "alice", Reason: "x"}, nil)
	require.ErrorContains(t, err, "want CONFIRMED, FAILED or PENDING")
	_, err = h.client.Resolve(ctx, first.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "", Reason: "x"}, nil)
	require.ErrorContains(t, err, "needs an actor and a reason")

	resolved, err := h.client.Resolve(ctx, first.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "bank confirmed wire w-1 by phone"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, resolved.State)
	history, err := h.client.History(ctx, first.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, "operator:alice", last.Actor)
	require.Equal(t, "bank confirmed wire w-1 by phone", last.Reason)
	_, err = h.client.Resolve(ctx, first.ID, effects.Resolution{To: effects.StateFailed, Actor: "alice", Reason: "again"}, nil)
	require.ErrorIs(t, err, effects.ErrNotStuck)

	// Back to PENDING: dispatched again with the same key. The bank is not idempotent, so this is
	// the operator's call to make — and it is what happens.
	second := h.wait(h.enqueue("bank.wire", "fog-2", 20).ID)
	require.Equal(t, effects.StateStuck, second.State)
	_, err = h.client.Resolve(ctx, second.ID, effects.Resolution{To: effects.StatePending, Actor: "bob", Reason: "bank says it never arrived"}, nil)
	require.NoError(t, err)
	again := h.wait(second.ID)
	require.Equal(t, effects.StateConfirmed, again.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK", "STUCK>PENDING", "PENDING>CONFIRMED"}, h.path(second.ID))
}

// Inconclusive status checks are counted as they are recorded, not as the reconcile job runs: a
// run whose conclusive answer could not be written (the effect's row stayed locked until the job
// timed out, as when Postgres goes away in between) counts for nothing; the effect becomes STUCK at
// exactly StatusCheckLimit inconclusive answers, and the audit trail gives their true number. Sent
// back to PENDING by an operator, it gets the whole limit again.
func TestInconclusiveChecksAreCountedWhenRecorded(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *effects.Config) { c.InFlightMargin = 500 * time.Millisecond })
	ctx := context.Background()
	const limit = 3
	var checks atomic.Int64
	unlocked := make(chan error, 1)
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "foggy", Tags: wireTags, Timeout: 300 * time.Millisecond, Backoff: testkit.FastBackoff, StatusCheckLimit: limit,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return nil, errors.New("connection reset by peer") // UNKNOWN
		},
		StatusCheck: func(_ context.Context, call effects.Call) (effects.Status, error) {
			if checks.Add(1) > 1 {
				return effects.Inconclusive("the ledger is behind"), nil
			}
			// The first answer is conclusive but cannot be recorded: the effect's row stays locked
			// until its reconcile job has given up (timed out) and waits to run again.
			tx, err := h.pool.Begin(ctx)
			require.NoError(t, err)
			var jobID int64
			require.NoError(t, tx.QueryRow(ctx, `SELECT job_id FROM reckon_effects WHERE id = $1 FOR UPDATE`, call.EffectID).Scan(&jobID))
			go func() {
				defer func() { unlocked <- tx.Rollback(ctx) }()
				for h.count(`SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running'`, jobID) == 1 {
					time.Sleep(10 * time.Millisecond)
				}
			}()
			return effects.Present(json.RawMessage(`{"wire":"w-1"}`)), nil
		},
	}))
	h.start()

	stuckAfter := func(id uuid.UUID, wantChecks int64) {
		t.Helper()
		effect := h.wait(id)
		require.Equal(t, effects.StateStuck, effect.State)
		// At least: on a loaded machine a run may time out once more before its answer is written;
		// what must hold is that only written answers count (below).
		require.GreaterOrEqual(t, checks.Load(), wantChecks, "status checks asked")
		history, err := h.client.History(ctx, id)
		require.NoError(t, err)
		last := history[len(history)-1]
		require.Equal(t, effects.StateStuck, last.To)
		require.Equal(t, "status check inconclusive 3 times: the ledger is behind", last.Reason)
		require.JSONEq(t, `{"status":"inconclusive","inconclusive_checks":3}`, string(last.Detail))
		require.Equal(t, limit, h.count(`SELECT inconclusive_checks FROM reckon_effects WHERE id = $1`, id))
	}
	effect := h.enqueue("foggy", "fog-counted", 10)
	stuckAfter(effect.ID, 1+limit) // the unrecorded answer, then three inconclusive ones
	require.NoError(t, <-unlocked)
	require.GreaterOrEqual(t, h.count(`SELECT max(attempt) FROM river_job WHERE kind = 'reckon_reconcile'`), 1+limit,
		"the reconcile job ran more often than the answers it recorded")
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK"}, h.path(effect.ID))

	_, err := h.client.Resolve(ctx, effect.ID, effects.Resolution{To: effects.StatePending, Actor: "alice", Reason: "try once more"}, nil)
	require.NoError(t, err)
	require.Equal(t, 0, h.count(`SELECT inconclusive_checks FROM reckon_effects WHERE id = $1`, effect.ID), "back to PENDING: the count starts over")
	stuckAfter(effect.ID, 1+2*limit)
}

func TestPermanentFailsWithoutRetry(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	h.bank.Script("no-1", fakebank.Reject)

	effect := h.wait(h.enqueue("bank.wire", "no-1", 10).ID)
	require.Equal(t, effects.StateFailed, effect.State)
	require.Contains(t, effect.Error, "400 Bad Request")
	require.Equal(t, 1, effect.Attempts)
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, 1, h.bank.Calls("/wires"))
	require.Zero(t, h.bank.Count("no-1"))
}

// Effects that fail together (an upstream outage) are not all tried again together: each retry
// delay is the connector's backoff varied by up to ±10%.
func TestRetryDelaysAreJittered(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const backoff, effectCount = 100 * time.Second, 30
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "down", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Backoff: func(int) time.Duration { return backoff },
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return nil, effects.Retryable(errors.New("upstream down"))
		},
	}))
	h.start()
	for i := range effectCount {
		h.enqueue("down", fmt.Sprintf("outage-%d", i), 1)
	}
	// Each effect's next dispatch is scheduled for its retry delay after the attempt was recorded
	// (the effect's updated_at): a job of its own snoozes, an effect of a shared job is handed to
	// a job of its own, scheduled then.
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_effects e JOIN river_job j ON j.id = e.job_id
			WHERE e.attempts = 1 AND j.state = 'scheduled'`) == effectCount
	}, 30*time.Second, 20*time.Millisecond)
	rows, err := h.pool.Query(context.Background(), `SELECT extract(epoch FROM j.scheduled_at - e.updated_at)::float8
		FROM reckon_effects e JOIN river_job j ON j.id = e.job_id`)
	require.NoError(t, err)
	delays, err := pgx.CollectRows(rows, pgx.RowTo[float64])
	require.NoError(t, err)
	require.Len(t, delays, effectCount)
	lowest, highest := delays[0], delays[0]
	for _, d := range delays {
		require.GreaterOrEqual(t, d, 0.9*backoff.Seconds(), "at most 10% early")
		require.LessOrEqual(t, d, 1.1*backoff.Seconds()+1, "at most 10% late (and a second for the call and its record)")
		lowest, highest = min(lowest, d), max(highest, d)
	}
	// Without jitter every delay would be the backoff plus a few milliseconds.
	require.Greater(t, highest-lowest, 2.0, "the delays are spread over the ±10%% band: %v", delays)
}

func TestRetryableIsRetriedThenConfirmedOrFailed(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, MaxAttempts: 3})
	h.start()
	h.bank.Script("busy-1", fakebank.Unavailable, fakebank.Unavailable)
	h.bank.Script("busy-2", fakebank.Unavailable, fakebank.Unavailable, fakebank.Unavailable)

	ok := h.wait(h.enqueue("bank.wire", "busy-1", 10).ID)
	require.Equal(t, effects.StateConfirmed, ok.State)
	require.Equal(t, 3, ok.Attempts)
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(ok.ID), "retries are not transitions")
	require.Equal(t, 1, h.bank.Count("busy-1"))

	spent := h.wait(h.enqueue("bank.wire", "busy-2", 10).ID)
	require.Equal(t, effects.StateFailed, spent.State)
	require.Equal(t, 3, spent.Attempts)
	history, err := h.client.History(context.Background(), spent.ID)
	require.NoError(t, err)
	require.Equal(t, "retry budget spent: 3 attempts, none applied", history[len(history)-1].Reason)
	require.Zero(t, h.bank.Count("busy-2"))
}

// Without a status check an idempotent connector is retried with the same key; the idempotent
// upstream performs once.
func TestIdempotentWithoutStatusCheckRetriesSameKey(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{Name: "bank.upsert", Tags: idempotentTags})
	h.start()
	h.bank.SetIdempotent(true)
	h.bank.Script("up-1", fakebank.PerformThenDrop)

	effect := h.wait(h.enqueue("bank.upsert", "up-1", 10).ID)
	require.Equal(t, effects.StateConfirmed, effect.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 2, h.bank.Calls("/wires"))
	require.Equal(t, 1, h.bank.Count("up-1"))
}

// Not idempotent and no status check: an UNKNOWN outcome is STUCK, never retried blindly.
func TestNonIdempotentWithoutStatusCheckIsStuck(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{Compensate: true})
	h.start()
	h.bank.Script("blind-1", fakebank.PerformThenDrop)

	effect := h.wait(h.enqueue("bank.wire", "blind-1", 10).ID)
	require.Equal(t, effects.StateStuck, effect.State)
	require.Equal(t, 1, h.bank.Calls("/wires"))
}

func TestCancelBeforeAnyAttempt(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	ctx := context.Background()

	later, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "later-1",
		Args: map[string]any{"account": "a", "amount": 3}}, &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	cancelled, err := h.client.Cancel(ctx, later.ID, "carol", "customer withdrew the request", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, cancelled.State)
	history, err := h.client.History(ctx, later.ID)
	require.NoError(t, err)
	require.Equal(t, "operator:carol", history[1].Actor)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE state = 'cancelled'`))

	_, err = h.client.Cancel(ctx, later.ID, "carol", "again", nil)
	require.ErrorIs(t, err, effects.ErrNotCancellable)
	done := h.wait(h.enqueue("bank.wire", "now-1", 3).ID)
	_, err = h.client.Cancel(ctx, done.ID, "carol", "too late", nil)
	require.ErrorIs(t, err, effects.ErrNotCancellable)
	_, err = h.client.Cancel(ctx, [16]byte{1}, "carol", "who", nil)
	require.ErrorIs(t, err, effects.ErrNotFound)
	require.Equal(t, 1, h.bank.Calls("/wires"), "the cancelled effect was never sent")
}

func TestDoInline(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()

	// No reactor needed for the happy path.
	effect, err := h.client.Do(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "inline-1", Args: map[string]any{"account": "a", "amount": 9}})
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, effect.State)
	require.Equal(t, 1, effect.Attempts)
	again, err := h.client.Do(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "inline-1", Args: map[string]any{"account": "a", "amount": 9}})
	require.NoError(t, err)
	require.True(t, again.Deduplicated)
	require.Equal(t, 1, h.bank.Calls("/wires"))

	// A retryable failure is handed to the reactors, after the backoff.
	h.bank.Script("inline-3", fakebank.Unavailable)
	busy, err := h.client.Do(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "inline-3", Args: map[string]any{"account": "a", "amount": 9}})
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, busy.State)
	require.Equal(t, 1, busy.Attempts)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job j JOIN reckon_effects e ON e.job_id = j.id WHERE e.id = $1 AND j.kind = 'reckon_dispatch'`, busy.ID))

	// An ambiguous outcome goes to the reactors' reconciliation.
	h.bank.Script("inline-2", fakebank.PerformThenDrop)
	effect, err = h.client.Do(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "inline-2", Args: map[string]any{"account": "a", "amount": 9}})
	require.NoError(t, err)
	require.Equal(t, effects.StateUnknown, effect.State)
	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	require.Equal(t, 1, h.bank.Count("inline-2"))
	require.Equal(t, effects.StateConfirmed, h.wait(busy.ID).State)
	require.Equal(t, 1, h.bank.Count("inline-3"))
}

func TestWaitHonoursContext(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	effect := h.enqueue("bank.wire", "never-1", 1) // no reactor running
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := h.client.Wait(ctx, effect.ID)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = h.client.Wait(context.Background(), [16]byte{2})
	require.ErrorIs(t, err, effects.ErrNotFound)
	require.NoError(t, h.client.Stop(context.Background()))
}
