package effects_test

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
)

func wireSpec(key, run string) effects.Spec {
	return effects.Spec{Connector: "bank.wire", IdempotencyKey: key, RunID: run, Args: map[string]any{"account": "acct-1", "amount": 10}}
}

func TestRunGuardrailsMaxSteps(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()

	run, err := h.client.StartRun(ctx, effects.RunSpec{ID: "r-steps", MaxSteps: 3})
	require.NoError(t, err)
	require.Equal(t, 3, run.MaxSteps)
	require.NoError(t, run.Halted)
	for i := range 3 {
		_, err := h.client.Enqueue(ctx, wireSpec(fmt.Sprintf("s-%d", i), "r-steps"), nil)
		require.NoError(t, err)
	}
	run, err = h.client.GetRun(ctx, "r-steps", nil)
	require.NoError(t, err)
	require.Equal(t, 3, run.Steps)
	require.Equal(t, 3, run.Effects[effects.StatePending])
	require.ErrorIs(t, run.Halted, effects.ErrRunMaxSteps, "the status says the next step is refused")

	// The step after the limit is refused, with nothing recorded, and the caller's transaction
	// stays usable.
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.EnqueueTx(ctx, tx, wireSpec("s-3", "r-steps"), nil)
		require.ErrorIs(t, err, effects.ErrRunMaxSteps)
		require.ErrorContains(t, err, "3 steps of 3")
		_, err = h.client.EnqueueTx(ctx, tx, wireSpec("elsewhere", "r-other"), nil)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects WHERE run_id = 'r-steps'`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE run_id = 'r-other'`))

	// Replays of existing keys are not steps; a batch with one new effect is refused whole.
	replay, err := h.client.Enqueue(ctx, wireSpec("s-0", "r-steps"), nil)
	require.NoError(t, err)
	require.True(t, replay.Deduplicated)
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.EnqueueManyTx(ctx, tx, []effects.Spec{wireSpec("s-1", "r-steps"), wireSpec("s-4", "r-steps")}, nil)
		return err
	})
	require.ErrorIs(t, err, effects.ErrRunMaxSteps)
	_, err = h.client.Do(ctx, wireSpec("s-inline", "r-steps"))
	require.ErrorIs(t, err, effects.ErrRunMaxSteps, "inline effects are steps too")
	run, err = h.client.GetRun(ctx, "r-steps", nil)
	require.NoError(t, err)
	require.Equal(t, 3, run.Steps)

	// Raising the limit lets the run go on, with its count kept.
	run, err = h.client.StartRun(ctx, effects.RunSpec{ID: "r-steps", MaxSteps: 4})
	require.NoError(t, err)
	require.Equal(t, 3, run.Steps)
	require.NoError(t, run.Halted)
	_, err = h.client.Enqueue(ctx, wireSpec("s-3", "r-steps"), nil)
	require.NoError(t, err)

	// Runs are per tenant (TestRunsPerTenant); an implicit run has no limits.
	other, err := h.client.GetRun(ctx, "r-other", nil)
	require.NoError(t, err)
	require.Equal(t, 1, other.Steps)
	require.Zero(t, other.MaxSteps)

	_, err = h.client.GetRun(ctx, "nope", nil)
	require.ErrorIs(t, err, effects.ErrRunNotFound)
	_, err = h.client.StartRun(ctx, effects.RunSpec{ID: "bad", MaxSteps: -1})
	require.Error(t, err)
	_, err = h.client.StartRun(ctx, effects.RunSpec{})
	require.Error(t, err)
}

func TestRunGuardrailsMaxConsecutiveFailures(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	ctx := context.Background()
	_, err := h.client.StartRun(ctx, effects.RunSpec{ID: "r-fail", MaxConsecutiveFailures: 2})
	require.NoError(t, err)

	step := func(key string, behavior fakebank.Behavior, want effects.State) {
		t.Helper()
		h.bank.Script(key, behavior)
		e, err := h.client.Enqueue(ctx, wireSpec(key, "r-fail"), nil)
		require.NoError(t, err)
		require.Equal(t, want, h.wait(e.ID).State)
	}
	step("f-1", fakebank.Reject, effects.StateFailed)
	step("c-1", fakebank.Succeed, effects.StateConfirmed) // ends the streak
	step("f-2", fakebank.Reject, effects.StateFailed)
	run, err := h.client.GetRun(ctx, "r-fail", nil)
	require.NoError(t, err)
	require.Equal(t, 1, run.ConsecutiveFailures)
	require.NoError(t, run.Halted)
	step("f-3", fakebank.Reject, effects.StateFailed)

	run, err = h.client.GetRun(ctx, "r-fail", nil)
	require.NoError(t, err)
	require.Equal(t, 2, run.ConsecutiveFailures)
	require.Equal(t, 3, run.Failures)
	require.Equal(t, 4, run.Steps)
	require.ErrorIs(t, run.Halted, effects.ErrRunMaxFailures)
	_, err = h.client.Enqueue(ctx, wireSpec("after", "r-fail"), nil)
	require.ErrorIs(t, err, effects.ErrRunMaxFailures)
	require.ErrorContains(t, err, "2 consecutive failures (limit 2)")
	require.Equal(t, 4, h.count(`SELECT count(*) FROM reckon_effects WHERE run_id = 'r-fail'`))
}

func TestCancelRun(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true})
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const run = "r-cancel"

	done := h.wait(h.enqueueJob("bank.wire", "c-done", func(s *effects.Spec) {
		*s = wireSpec("c-done", run)
	}).ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	later, err := h.client.Enqueue(ctx, wireSpec("c-later", run), &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	canCancel := h.awaitAccepted(h.enqueueJob("jobs.run", "c-cancel", func(s *effects.Spec) { s.RunID = run }).ID)
	noCancel := h.awaitAccepted(h.enqueueJob("jobs.nocancel", "c-nocancel", func(s *effects.Spec) { s.RunID = run }).ID)
	forgotten := h.awaitAccepted(h.enqueueJob("jobs.nocancel", "c-forgotten", func(s *effects.Spec) { s.RunID = run }).ID)

	_, err = h.client.CancelRun(ctx, run, "", "", nil)
	require.Error(t, err)
	_, err = h.client.CancelRun(ctx, "no-such-run", "alice", "x", nil)
	require.ErrorIs(t, err, effects.ErrRunNotFound)

	res, err := h.client.CancelRun(ctx, run, "alice", "user aborted", nil)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{later.ID}, res.Failed)
	require.ElementsMatch(t, []uuid.UUID{canCancel.ID, noCancel.ID, forgotten.ID}, res.Awaiting)
	require.Empty(t, res.Left)
	require.ErrorIs(t, res.Run.Halted, effects.ErrRunCancelled)
	require.Equal(t, "caller:alice", res.Run.CancelledBy)
	require.Equal(t, "user aborted", res.Run.CancelReason)

	// Unattempted: FAILED (cancelled), its dispatch job cancelled, the bank never called.
	got, err := h.client.Get(ctx, later.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, got.State)
	require.Equal(t, "cancelled: run cancelled by caller: user aborted", got.Error)
	require.Equal(t, 0, h.bank.Count("c-later"))
	require.Equal(t, "cancelled", h.jobState(`SELECT state::text FROM river_job WHERE kind = 'reckon_dispatch' AND args->>'effect_id' = $1`, later.ID.String()))

	// Awaiting, cancellable upstream: FAILED, the upstream job cancelled, the timer a no-op.
	got, err = h.client.Get(ctx, canCancel.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, got.State)
	require.Equal(t, "cancelled by caller: cancelled upstream", got.Error)
	job, _ := h.up.Job(canCancel.CorrelationID)
	require.Equal(t, "cancelled", job.State)
	require.Equal(t, "cancelled", h.deadlineJobState(canCancel.ID))

	// Awaiting, no way to cancel upstream: recorded as cancelled by the caller, outcome unknown;
	// the upstream's callback still resolves it.
	got, err = h.client.Get(ctx, noCancel.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateUnknown, got.State)
	require.Equal(t, "cancelled by caller while awaiting callback", got.Error)
	require.Equal(t, "cancelled", h.deadlineJobState(noCancel.ID))

	// Reconciliation finds the upstream never had it: FAILED, not dispatched again, since the run
	// was cancelled.
	h.up.Forget(forgotten.CorrelationID)
	got = h.wait(forgotten.ID)
	require.Equal(t, effects.StateFailed, got.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>FAILED"}, h.path(forgotten.ID))
	require.Contains(t, h.reasons(forgotten.ID), "status check: absent, and the run was cancelled: not dispatched again")
	require.Equal(t, 3, h.up.Dispatches())

	// Done effects are untouched; nothing more joins the run.
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(done.ID))
	_, err = h.client.Enqueue(ctx, wireSpec("c-new", run), nil)
	require.ErrorIs(t, err, effects.ErrRunCancelled)

	type waited struct {
		res *effects.RunResult
		err error
	}
	gate := make(chan waited, 1)
	go func() {
		res, err := h.client.WaitRun(ctx, run, nil)
		gate <- waited{res, err}
	}()
	_, err = h.up.Finish(ctx, noCancel.CorrelationID, json.RawMessage(`{"finished":"anyway"}`))
	require.NoError(t, err)
	w := <-gate
	require.NoError(t, w.err)
	result := w.res
	require.Len(t, result.Effects, 5)
	require.Len(t, result.Async, 3)
	require.Equal(t, 3, result.Run.Effects[effects.StateFailed])
	require.Equal(t, 2, result.Run.Effects[effects.StateConfirmed])
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(noCancel.ID))

	// Cancelling again is harmless and keeps the first actor.
	again, err := h.client.CancelRun(ctx, run, "bob", "again", nil)
	require.NoError(t, err)
	require.Empty(t, again.Failed)
	require.Equal(t, "caller:alice", again.Run.CancelledBy)
}

// TestRunsPerTenant: two tenants naming one run id have two independent runs. One's guardrail
// does not refuse the other, one's cancellation fails none of the other's effects and does not stop
// its retries, and each status, gate and count sees only the tenant's own effects.
func TestRunsPerTenant(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const run = "r-shared"
	acme, globex := &effects.RunOpts{TenantID: "acme"}, &effects.RunOpts{TenantID: "globex"}
	spec := func(tenant, key string) effects.Spec {
		s := wireSpec(key, run)
		s.TenantID = tenant
		return s
	}
	later := &effects.EnqueueOpts{ScheduledAt: time.Now().Add(time.Hour)}

	// acme's run allows one step; globex's run of the same id has no guardrail.
	started, err := h.client.StartRun(ctx, effects.RunSpec{ID: run, TenantID: "acme", MaxSteps: 1})
	require.NoError(t, err)
	require.Equal(t, "acme", started.TenantID)
	acmeLater, err := h.client.Enqueue(ctx, spec("acme", "a-1"), later)
	require.NoError(t, err)
	_, err = h.client.Enqueue(ctx, spec("acme", "a-2"), later)
	require.ErrorIs(t, err, effects.ErrRunMaxSteps, "acme's run is full")
	globexLater, err := h.client.Enqueue(ctx, spec("globex", "g-1"), later)
	require.NoError(t, err, "acme's full run does not refuse globex's")
	// One batch may name the id for both tenants: two runs, each checked on its own.
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.EnqueueManyTx(ctx, tx, []effects.Spec{spec("globex", "g-2"), spec("acme", "a-3")}, later)
		return err
	})
	require.ErrorIs(t, err, effects.ErrRunMaxSteps, "the batch is refused whole by acme's guardrail")
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.EnqueueManyTx(ctx, tx, []effects.Spec{spec("globex", "g-2"), spec("acme", "a-1")}, later)
		return err
	})
	require.NoError(t, err, "acme's replay is not a step; globex's new effect joins globex's run")
	// Setting globex's guardrails leaves acme's alone.
	_, err = h.client.StartRun(ctx, effects.RunSpec{ID: run, TenantID: "globex", MaxSteps: 10})
	require.NoError(t, err)

	status := func(opts *effects.RunOpts) *effects.Run {
		t.Helper()
		r, err := h.client.GetRun(ctx, run, opts)
		require.NoError(t, err)
		return r
	}
	a, g := status(acme), status(globex)
	require.Equal(t, []any{"acme", 1, 1, 1}, []any{a.TenantID, a.MaxSteps, a.Steps, a.Effects[effects.StatePending]})
	require.ErrorIs(t, a.Halted, effects.ErrRunMaxSteps)
	require.Equal(t, []any{"globex", 10, 2, 2}, []any{g.TenantID, g.MaxSteps, g.Steps, g.Effects[effects.StatePending]})
	require.NoError(t, g.Halted)
	_, err = h.client.GetRun(ctx, run, nil)
	require.ErrorIs(t, err, effects.ErrRunNotFound, "the default tenant has no run of that id")
	_, err = h.client.CancelRun(ctx, run, "alice", "x", &effects.RunOpts{TenantID: "initech"})
	require.ErrorIs(t, err, effects.ErrRunNotFound)

	// Cancelling acme's run fails acme's unattempted effect only.
	res, err := h.client.CancelRun(ctx, run, "alice", "user aborted", acme)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{acmeLater.ID}, res.Failed)
	require.Empty(t, res.Left)
	require.Equal(t, "acme", res.Run.TenantID)
	require.ErrorIs(t, res.Run.Halted, effects.ErrRunCancelled)
	got, err := h.client.Get(ctx, globexLater.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, got.State)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE args->>'effect_id' = $1 AND state = 'scheduled'`, globexLater.ID.String()),
		"globex's dispatch job is still scheduled")
	g = status(globex)
	require.Nil(t, g.CancelledAt)
	require.NoError(t, g.Halted)
	_, err = h.client.Enqueue(ctx, spec("acme", "a-4"), nil)
	require.ErrorIs(t, err, effects.ErrRunCancelled)

	// globex's run goes on: a retryable failure is tried again (a cancelled run's would not be).
	h.bank.Script("g-3", fakebank.Unavailable)
	retried, err := h.client.Enqueue(ctx, spec("globex", "g-3"), nil)
	require.NoError(t, err)
	confirmed := h.wait(retried.ID)
	require.Equal(t, effects.StateConfirmed, confirmed.State)
	require.Equal(t, 2, confirmed.Attempts, "the 503 was tried again")
	require.Equal(t, 1, h.bank.Count("g-3"))

	// Each gate sees its own tenant's effects: acme's run is settled although globex's has PENDING
	// effects.
	gate, err := h.client.WaitRun(ctx, run, acme)
	require.NoError(t, err)
	require.Len(t, gate.Effects, 1)
	require.Equal(t, acmeLater.ID, gate.Effects[0].ID)
	g = status(globex)
	require.Equal(t, 3, g.Steps)
	require.Equal(t, map[effects.State]int{effects.StatePending: 2, effects.StateConfirmed: 1}, g.Effects)
}

// TestRunMaxStepsConcurrent: enqueues racing into one run are checked one after the other, so
// exactly MaxSteps of them get in.
func TestRunMaxStepsConcurrent(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	_, err := h.client.StartRun(ctx, effects.RunSpec{ID: "r-race", MaxSteps: 5})
	require.NoError(t, err)
	errs := make(chan error, 12)
	for i := range 12 {
		go func() {
			_, err := h.client.Enqueue(ctx, wireSpec(fmt.Sprintf("race-%d", i), "r-race"), nil)
			errs <- err
		}()
	}
	ok, refused := 0, 0
	for range 12 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, effects.ErrRunMaxSteps):
			refused++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 5, ok)
	require.Equal(t, 7, refused)
	require.Equal(t, 5, h.count(`SELECT count(*) FROM reckon_effects WHERE run_id = 'r-race'`))
}

// TestCancelRunStopsRetries: an effect waiting to be retried after a retryable failure (nothing
// applied) is cancelled like an unattempted one; one in flight at the moment of the cancellation
// finishes, and its retryable failure is not tried again.
func TestCancelRunStopsRetries(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Checkpoints: true, Timeout: time.Second,
		Backoff: func(int) time.Duration { return time.Hour }})
	h.start()
	ctx := context.Background()
	const run = "r-stop"

	h.bank.Script("retried", fakebank.Unavailable)
	retried, err := h.client.Enqueue(ctx, wireSpec("retried", run), nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		e, err := h.client.Get(ctx, retried.ID)
		require.NoError(t, err)
		return e.Attempts == 1
	}, 20*time.Second, 10*time.Millisecond, "the first attempt answered 503 and is retried in an hour")
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE args->>'effect_id' = $1 AND state = 'scheduled'`, retried.ID.String()) == 1
	}, 20*time.Second, 10*time.Millisecond, "River snoozed the dispatch job")

	reached := h.bank.Arm("before-call")
	held, err := h.client.Enqueue(ctx, wireSpec("held", run), nil)
	require.NoError(t, err)
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the dispatch never reached the bank")
	}

	res, err := h.client.CancelRun(ctx, run, "alice", "stop", nil)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{retried.ID}, res.Failed)
	require.Equal(t, []uuid.UUID{held.ID}, res.Left, "in flight")
	require.Equal(t, effects.StateFailed, h.wait(retried.ID).State)

	// The held call times out before reaching the bank: retryable, but the run is cancelled.
	done := h.wait(held.ID)
	require.Equal(t, effects.StateFailed, done.State)
	require.Contains(t, h.path(held.ID), "PENDING>FAILED")
	history, err := h.client.History(ctx, held.ID)
	require.NoError(t, err)
	require.Equal(t, "retryable failure, none applied, and the run was cancelled: not tried again", history[len(history)-1].Reason)
	require.Equal(t, 0, h.bank.Count("held"))
	require.Equal(t, 0, h.bank.Count("retried"))
}

// TestCancelledRunRetryNotDispatched: a retry of a cancelled run's effect is failed instead of
// dispatched (the run is cancelled directly, as if CancelRun ran while the attempt was being
// recorded).
func TestCancelledRunRetryNotDispatched(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Backoff: func(int) time.Duration { return 2 * time.Second }})
	h.start()
	ctx := context.Background()
	h.bank.Script("again", fakebank.Unavailable, fakebank.Unavailable, fakebank.Unavailable)
	e, err := h.client.Enqueue(ctx, wireSpec("again", "r-again"), nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := h.client.Get(ctx, e.ID)
		require.NoError(t, err)
		return got.Attempts == 1
	}, 20*time.Second, 10*time.Millisecond)
	_, err = h.pool.Exec(ctx, `UPDATE reckon_runs SET cancelled_at = now(), cancelled_by = 'test', cancel_reason = 'race' WHERE id = 'r-again'`)
	require.NoError(t, err)

	done := h.wait(e.ID)
	require.Equal(t, effects.StateFailed, done.State)
	history, err := h.client.History(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, "the run was cancelled: not tried again (no earlier attempt took effect)", history[len(history)-1].Reason)
	require.Equal(t, 1, h.bank.Calls("/wires"), "not called again")
}
