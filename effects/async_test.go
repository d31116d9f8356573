package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakejobs"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// asyncHarness adds to the harness a fake async upstream on 127.0.0.1 and a callback receiver (a
// real HTTP server handing callbacks to Client.Callback), with two connectors: "jobs.run", which
// can cancel upstream, and "jobs.nocancel", which cannot. Both await callbacks for an hour unless
// told otherwise.
type asyncHarness struct {
	*harness
	up          *fakejobs.Upstream
	callbackURL string
}

func setupAsync(t *testing.T) *asyncHarness {
	t.Helper()
	h := &asyncHarness{harness: setup(t), up: fakejobs.New(t)}
	mux := http.NewServeMux()
	mux.Handle("POST /callbacks/{id}", fakejobs.CallbackHandler(h.client))
	receiver := httptest.NewServer(mux)
	t.Cleanup(receiver.Close)
	h.callbackURL = receiver.URL + "/callbacks"
	for _, o := range []fakejobs.ConnectorOptions{
		{Name: "jobs.run", Cancel: true},
		{Name: "jobs.nocancel"},
	} {
		o.BaseURL, o.CallbackURL = h.up.URL(), h.callbackURL
		o.AsyncTimeout, o.Timeout, o.StatusCheckLimit = time.Hour, 2*time.Second, 1000
		o.Backoff = func(int) time.Duration { return 100 * time.Millisecond }
		require.NoError(t, h.registry.Register(o.Connector()))
	}
	return h
}

func (h *asyncHarness) enqueueJob(connector, key string, edit func(*effects.Spec)) *effects.Effect {
	h.t.Helper()
	spec := effects.Spec{Connector: connector, IdempotencyKey: key, Args: map[string]any{"job": key}}
	if edit != nil {
		edit(&spec)
	}
	effect, err := h.client.Enqueue(context.Background(), spec, nil)
	require.NoError(h.t, err)
	return effect
}

// awaitAccepted waits until the acceptance of the effect is recorded: PENDING with a correlation
// id and a deadline.
func (h *asyncHarness) awaitAccepted(id uuid.UUID) *effects.Effect {
	h.t.Helper()
	effect := h.await(id, "recorded as accepted", func(e *effects.Effect) bool { return e.CorrelationID != "" })
	require.Equal(h.t, effects.StatePending, effect.State)
	require.NotNil(h.t, effect.DeadlineAt)
	return effect
}

// awaitState polls until the effect is in state (UNKNOWN is not announced by a notification).
func (h *asyncHarness) awaitState(id uuid.UUID, state effects.State) *effects.Effect {
	h.t.Helper()
	return h.await(id, "became "+string(state), func(e *effects.Effect) bool { return e.State == state })
}

// await polls the effect until done holds for it; what says what the effect never did.
func (h *asyncHarness) await(id uuid.UUID, what string, done func(*effects.Effect) bool) *effects.Effect {
	h.t.Helper()
	var effect *effects.Effect
	require.Eventually(h.t, func() bool {
		var err error
		effect, err = h.client.Get(context.Background(), id)
		require.NoError(h.t, err)
		return done(effect)
	}, 20*time.Second, 10*time.Millisecond, "effect %s never %s", id, what)
	return effect
}

func (h *asyncHarness) jobState(sql string, args ...any) string {
	h.t.Helper()
	var state string
	require.NoError(h.t, h.pool.QueryRow(context.Background(), sql, args...).Scan(&state))
	return state
}

// deadlineJobState is the state of the effect's deadline job (the one and only).
func (h *asyncHarness) deadlineJobState(id uuid.UUID) string {
	h.t.Helper()
	require.Equal(h.t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_deadline' AND args->>'effect_id' = $1`, id.String()))
	return h.jobState(`SELECT state::text FROM river_job WHERE kind = 'reckon_deadline' AND args->>'effect_id' = $1`, id.String())
}

func (h *asyncHarness) reasons(id uuid.UUID) []string {
	h.t.Helper()
	history, err := h.client.History(context.Background(), id)
	require.NoError(h.t, err)
	var reasons []string
	for _, tr := range history {
		reasons = append(reasons, tr.Reason)
	}
	return reasons
}

func TestAsyncCallbackBeforeDeadline(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()

	ok := h.enqueueJob("jobs.run", "cb-ok", func(s *effects.Spec) { s.RunID = "run-cb" })
	bad := h.enqueueJob("jobs.run", "cb-bad", nil)
	okAccepted, badAccepted := h.awaitAccepted(ok.ID), h.awaitAccepted(bad.ID)
	require.Equal(t, "run-cb:"+ok.ID.String(), okAccepted.CorrelationID, "self-routing {run}:{uuid}")
	require.Equal(t, bad.ID.String(), badAccepted.CorrelationID, "an effect without a run: {uuid}")
	require.WithinDuration(t, time.Now().Add(time.Hour), *okAccepted.DeadlineAt, time.Minute, "the connector's AsyncTimeout")
	require.Equal(t, "scheduled", h.deadlineJobState(ok.ID))
	job, found := h.up.Job(okAccepted.CorrelationID)
	require.True(t, found)
	require.Equal(t, "running", job.State)

	status, err := h.up.Finish(ctx, okAccepted.CorrelationID, json.RawMessage(`{"rows":42}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	status, err = h.up.Fail(ctx, badAccepted.CorrelationID, "quota exceeded")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	done := h.wait(ok.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.JSONEq(t, `{"rows":42}`, string(done.Result))
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(ok.ID))
	require.Contains(t, h.reasons(ok.ID), "accepted upstream: awaiting callback")
	require.Equal(t, "cancelled", h.deadlineJobState(ok.ID), "the timer became a no-op")

	failed := h.wait(bad.ID)
	require.Equal(t, effects.StateFailed, failed.State)
	require.Equal(t, "quota exceeded", failed.Error)
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(bad.ID))
	require.Equal(t, "cancelled", h.deadlineJobState(bad.ID))
	require.Equal(t, 2, h.up.Dispatches(), "each job dispatched once")
	require.Equal(t, 2.0, h.metric("reckon_effect_accepted_total", map[string]string{"connector": "jobs.run"}))
}

func TestAsyncDeadlineThenLateCallback(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()

	// The per-call override beats the connector's hour.
	effect := h.enqueueJob("jobs.nocancel", "late", func(s *effects.Spec) { s.AsyncTimeout = 300 * time.Millisecond })
	accepted := h.awaitAccepted(effect.ID)
	require.WithinDuration(t, time.Now(), *accepted.DeadlineAt, 5*time.Second)

	unknown := h.awaitState(effect.ID, effects.StateUnknown)
	require.Equal(t, "async deadline passed without a callback", unknown.Error)
	require.Equal(t, "completed", h.deadlineJobState(effect.ID))
	require.Contains(t, h.reasons(effect.ID), "async deadline passed (soft timeout): outcome unknown; a late callback still resolves it")
	// The upstream's job keeps running: reconciliation finds it inconclusive and asks again.

	status, err := h.up.Finish(ctx, accepted.CorrelationID, json.RawMessage(`{"late":true}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.JSONEq(t, `{"late":true}`, string(done.Result))
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 1, h.up.Dispatches(), "never dispatched again")
	require.Equal(t, 1.0, h.metric("reckon_effect_deadlines_total", map[string]string{"connector": "jobs.nocancel", "to": "UNKNOWN"}))
}

func TestAsyncDeadlinePrecedence(t *testing.T) {
	t.Parallel()
	h := &asyncHarness{harness: setup(t), up: fakejobs.New(t)}
	h.callbackURL = "http://127.0.0.1:1/callbacks" // never called here
	config := testkit.FastConfig(h.registry)
	config.AsyncTimeout = 4 * time.Hour
	client, err := effects.NewClient(h.pool, config)
	require.NoError(t, err)
	h.client = client
	for name, timeout := range map[string]time.Duration{"jobs.configured": 3 * time.Hour, "jobs.default": 0} {
		require.NoError(t, h.registry.Register(fakejobs.ConnectorOptions{
			Name: name, BaseURL: h.up.URL(), CallbackURL: h.callbackURL, AsyncTimeout: timeout,
		}.Connector()))
	}
	h.start()

	perCall := h.enqueueJob("jobs.configured", "per-call", func(s *effects.Spec) { s.AsyncTimeout = 2 * time.Hour })
	perConnector := h.enqueueJob("jobs.configured", "per-connector", nil)
	byDefault := h.enqueueJob("jobs.default", "default", nil)
	for _, c := range []struct {
		id   uuid.UUID
		want time.Duration
	}{{perCall.ID, 2 * time.Hour}, {perConnector.ID, 3 * time.Hour}, {byDefault.ID, 4 * time.Hour}} {
		accepted := h.awaitAccepted(c.id)
		require.WithinDuration(t, time.Now().Add(c.want), *accepted.DeadlineAt, 5*time.Minute)
		var scheduled time.Time
		require.NoError(t, h.pool.QueryRow(context.Background(),
			`SELECT scheduled_at FROM river_job WHERE kind = 'reckon_deadline' AND args->>'effect_id' = $1`, c.id.String()).Scan(&scheduled))
		require.WithinDuration(t, *accepted.DeadlineAt, scheduled, time.Millisecond, "the timer is a River job at the deadline")
	}

	_, err = h.client.Enqueue(context.Background(), effects.Spec{Connector: "jobs.default", IdempotencyKey: "neg", AsyncTimeout: -time.Second}, nil)
	require.ErrorContains(t, err, "AsyncTimeout")
	require.Error(t, h.registry.Register(effects.Connector{Name: "bad", Dispatch: fakejobs.ConnectorOptions{}.Connector().Dispatch,
		Tags: []effects.Tag{effects.TagRead}, AsyncTimeout: -time.Second}))
}

func TestAsyncDuplicateAndConflictingCallbacks(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()
	ok := h.awaitAccepted(h.enqueueJob("jobs.run", "dup-ok", nil).ID)
	bad := h.awaitAccepted(h.enqueueJob("jobs.run", "dup-bad", nil).ID)

	first, err := h.client.Callback(ctx, ok.CorrelationID, json.RawMessage(`{"a":1,"b":[1,2]}`), "", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, first.State)
	before := len(h.reasons(ok.ID))

	// The same report again — in another key order and spacing — is idempotent: nothing is written.
	again, err := h.client.Callback(ctx, ok.CorrelationID, json.RawMessage(`{ "b":[1,2], "a":1 }`), "", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, again.State)
	require.Len(t, h.reasons(ok.ID), before)
	status, err := h.up.Finish(ctx, ok.CorrelationID, json.RawMessage(`{"a":1,"b":[1,2]}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "a repeated webhook delivery is acknowledged")

	// Another result, or an error, conflicts: refused, recorded for the audit, effect unchanged.
	conflict, err := h.client.Callback(ctx, ok.CorrelationID, json.RawMessage(`{"a":2}`), "", nil)
	require.ErrorIs(t, err, effects.ErrCallbackConflict)
	require.JSONEq(t, `{"a":1,"b":[1,2]}`, string(conflict.Result))
	_, err = h.client.Callback(ctx, ok.CorrelationID, nil, "boom", nil)
	require.ErrorIs(t, err, effects.ErrCallbackConflict)
	status, err = h.up.Fail(ctx, ok.CorrelationID, "boom")
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, status)
	stored, err := h.client.Get(ctx, ok.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, stored.State)
	require.JSONEq(t, `{"a":1,"b":[1,2]}`, string(stored.Result))
	require.Len(t, h.reasons(ok.ID), before+3, "three conflicting callbacks recorded as observations")
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(ok.ID))

	// A FAILED effect: the same error is idempotent, a success or another error conflicts.
	_, err = h.client.Callback(ctx, bad.CorrelationID, nil, "no capacity", nil)
	require.NoError(t, err)
	_, err = h.client.Callback(ctx, bad.CorrelationID, nil, "no capacity", nil)
	require.NoError(t, err)
	_, err = h.client.Callback(ctx, bad.CorrelationID, nil, "other reason", nil)
	require.ErrorIs(t, err, effects.ErrCallbackConflict)
	_, err = h.client.Callback(ctx, bad.CorrelationID, json.RawMessage(`{}`), "", nil)
	require.ErrorIs(t, err, effects.ErrCallbackConflict)
	stored, err = h.client.Get(ctx, bad.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, stored.State)
	require.Equal(t, "no capacity", stored.Error)
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(bad.ID))
}

func TestAsyncUnknownCorrelationAndBadInput(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	ctx := context.Background()
	// Not started: this effect is never dispatched, so nobody can know to call it back.
	queued := h.enqueueJob("jobs.run", "queued", func(s *effects.Spec) { s.RunID = "r1" })

	for _, id := range []string{
		"", "nonsense", "r1:not-a-uuid", "r1:" + uuid.NewString(), uuid.NewString(),
		"other-run:" + queued.ID.String(), // the right effect under the wrong run
	} {
		_, err := h.client.Callback(ctx, id, json.RawMessage(`{}`), "", nil)
		require.ErrorIs(t, err, effects.ErrUnknownCorrelation, "correlation id %q", id)
	}
	// The right id of an effect that awaits no callback: refused, and the refusal is in its history.
	got, err := h.client.Callback(ctx, "r1:"+queued.ID.String(), json.RawMessage(`{}`), "", nil)
	require.ErrorIs(t, err, effects.ErrNotAwaitingCallback)
	require.ErrorContains(t, err, "was never dispatched")
	require.Equal(t, effects.StatePending, got.State)
	require.Equal(t, "callback not applied: "+err.Error(), h.reasons(queued.ID)[1])
	_, err = h.client.Callback(ctx, "r1:"+queued.ID.String(), json.RawMessage(`{not json`), "", nil)
	require.ErrorContains(t, err, "not valid JSON")
	_, err = h.client.Callback(ctx, "r1:"+queued.ID.String(), json.RawMessage(`{}`), "and an error", nil)
	require.ErrorContains(t, err, "not both")

	stored, err := h.client.Get(ctx, queued.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, stored.State)
	require.Equal(t, []string{">PENDING"}, h.path(queued.ID), "nothing changed")

	// Through HTTP: 404.
	resp, err := http.Post(h.callbackURL+"/r1:"+uuid.NewString(), "application/json", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no body")
	status, err := postCallback(h.callbackURL+"/r1:"+uuid.NewString(), `{"result":{}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, status)
}

func postCallback(u, body string) (int, error) {
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestAsyncCallbackOvertakesAcceptance: a fast upstream calls back before the dispatch that
// started the job has recorded the acceptance. The self-routing correlation id finds the effect
// anyway; the dispatch's late record is fenced out and kept in the audit trail.
func TestAsyncCallbackOvertakesAcceptance(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.up.FinishEarly("fast", json.RawMessage(`{"fast":true}`))
	h.start()
	effect := h.enqueueJob("jobs.run", "fast", func(s *effects.Spec) { s.RunID = "run-fast" })
	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.JSONEq(t, `{"fast":true}`, string(done.Result))
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, "run-fast:"+effect.ID.String(), done.CorrelationID, "known as async although its acceptance was fenced out")
	require.Eventually(t, func() bool {
		for _, r := range h.reasons(effect.ID) {
			if r == "fenced out: accepted" {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the dispatch's acceptance is fenced out and recorded")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_deadline'`), "no timer for a resolved effect")
}

func TestAsyncHardTimeout(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()
	hard := func(s *effects.Spec) { s.AsyncTimeout, s.AsyncHardTimeout = 200*time.Millisecond, true }

	// The connector can cancel and the upstream agrees: FAILED, and the job is cancelled upstream.
	cancelled := h.awaitAccepted(h.enqueueJob("jobs.run", "hard-cancel", hard).ID)
	failed := h.wait(cancelled.ID)
	require.Equal(t, effects.StateFailed, failed.State)
	require.Equal(t, "hard timeout: cancelled upstream", failed.Error)
	job, _ := h.up.Job(cancelled.CorrelationID)
	require.Equal(t, "cancelled", job.State)
	require.Equal(t, []string{">PENDING", "PENDING>FAILED"}, h.path(cancelled.ID))
	// The upstream's own report of the cancellation is not the same outcome text: a conflict, kept.
	_, err := h.client.Callback(ctx, cancelled.CorrelationID, json.RawMessage(`{"done":true}`), "", nil)
	require.ErrorIs(t, err, effects.ErrCallbackConflict)

	// The connector cannot cancel: UNKNOWN.
	noCancel := h.awaitAccepted(h.enqueueJob("jobs.nocancel", "hard-nocancel", hard).ID)
	unknown := h.awaitState(noCancel.ID, effects.StateUnknown)
	require.Equal(t, "hard timeout: the connector cannot cancel upstream", unknown.Error)

	// The upstream refuses to cancel: UNKNOWN, then its callback resolves it.
	h.up.SetCancellable(false)
	refused := h.awaitAccepted(h.enqueueJob("jobs.run", "hard-refused", hard).ID)
	unknown = h.awaitState(refused.ID, effects.StateUnknown)
	require.Contains(t, unknown.Error, "the upstream could not be cancelled")
	_, err = h.client.Callback(ctx, refused.CorrelationID, json.RawMessage(`{"ok":1}`), "", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, h.wait(refused.ID).State)
}

// TestAsyncDeadlineSurvivesReactorRestart: the reactor that recorded the acceptance is killed
// (SIGKILL, a real process) before the deadline; the deadline still fires, exactly once, in the
// reactors that run afterwards — two of them, competing.
func TestAsyncDeadlineSurvivesReactorRestart(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	startChild := func() *proctest.Process {
		return testkit.StartChild(t,
			childReactorEnv+"=1",
			"DATABASE_URL="+h.pool.Config().ConnString(),
			"BANK_URL="+h.bank.URL(),
			"JOBS_URL="+h.up.URL(),
			"CALLBACK_URL="+h.callbackURL,
		)
	}
	first := startChild()
	effect := h.enqueueJob("jobs.run", "restart", func(s *effects.Spec) {
		s.RunID, s.AsyncTimeout = "run-restart", 5*time.Second
	})
	accepted := h.awaitAccepted(effect.ID)
	first.Signal(t, syscall.SIGKILL)
	first.Wait(t, 10*time.Second)
	stored, err := h.client.Get(context.Background(), effect.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, stored.State, "the dead reactor's deadline has not passed yet")
	require.Equal(t, "scheduled", h.deadlineJobState(effect.ID))

	second, third := startChild(), startChild()
	h.awaitState(effect.ID, effects.StateUnknown)
	require.Equal(t, "completed", h.deadlineJobState(effect.ID))
	fired := 0
	for _, r := range h.reasons(effect.ID) {
		if r == "async deadline passed (soft timeout): outcome unknown; a late callback still resolves it" {
			fired++
		}
	}
	require.Equal(t, 1, fired, "the deadline fired once")
	require.Equal(t, 1, h.up.Dispatches())

	status, err := h.up.Finish(context.Background(), accepted.CorrelationID, json.RawMessage(`{"after":"restart"}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(effect.ID))

	for _, p := range []*proctest.Process{second, third} {
		p.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, p.Wait(t, 15*time.Second), p.Stderr())
	}
}

func TestWaitRunGate(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const run = "gate-run"
	var accepted []*effects.Effect
	for i := range 3 {
		e := h.enqueueJob("jobs.run", fmt.Sprintf("gate-%d", i), func(s *effects.Spec) { s.RunID = run })
		accepted = append(accepted, h.awaitAccepted(e.ID))
	}
	type waited struct {
		res *effects.RunResult
		err error
	}
	gate := make(chan waited, 1)
	go func() {
		res, err := h.client.WaitRun(ctx, run, nil)
		gate <- waited{res, err}
	}()

	want := map[uuid.UUID]string{}
	order := rand.Perm(3)
	for n, i := range order {
		select {
		case w := <-gate:
			t.Fatalf("the gate opened with %d of 3 effects resolved: %+v", n, w)
		default:
		}
		e := accepted[i]
		if i == 1 {
			_, err := h.up.Fail(ctx, e.CorrelationID, "job 1 failed")
			require.NoError(t, err)
			want[e.ID] = "error:job 1 failed"
			continue
		}
		result := fmt.Sprintf(`{"job":%d}`, i)
		status, err := h.up.Finish(ctx, e.CorrelationID, json.RawMessage(result))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		want[e.ID] = result
	}
	w := <-gate
	require.NoError(t, w.err)
	require.Len(t, w.res.Effects, 3)
	require.Len(t, w.res.Async, 3)
	for _, e := range w.res.Async {
		require.True(t, e.State.Terminal(), "gate returned with %s %s", e.ID, e.State)
		if e.State == effects.StateFailed {
			require.Equal(t, want[e.ID], "error:"+e.Error)
		} else {
			require.Equal(t, effects.StateConfirmed, e.State)
			require.JSONEq(t, want[e.ID], string(e.Result))
		}
	}
	require.Equal(t, 0, w.res.Run.Unresolved())
	require.Equal(t, 2, w.res.Run.Effects[effects.StateConfirmed])
	require.Equal(t, 1, w.res.Run.Effects[effects.StateFailed])

	// Settled runs pass the gate at once; unknown ones are an error.
	res, err := h.client.WaitRun(ctx, run, nil)
	require.NoError(t, err)
	require.Len(t, res.Async, 3)
	_, err = h.client.WaitRun(ctx, "no-such-run", nil)
	require.ErrorIs(t, err, effects.ErrRunNotFound)
}

// TestWaitRunWaitsForUnknown: an effect whose deadline passed is UNKNOWN, which keeps the gate
// closed until its late callback.
func TestWaitRunWaitsForUnknown(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := h.awaitAccepted(h.enqueueJob("jobs.nocancel", "gate-unknown", func(s *effects.Spec) {
		s.RunID, s.AsyncTimeout = "gate-unknown", 100*time.Millisecond
	}).ID)
	h.awaitState(e.ID, effects.StateUnknown)
	gate := make(chan error, 1)
	go func() {
		_, err := h.client.WaitRun(ctx, "gate-unknown", nil)
		gate <- err
	}()
	run, err := h.client.GetRun(ctx, "gate-unknown", nil)
	require.NoError(t, err)
	require.Equal(t, 1, run.Effects[effects.StateUnknown])
	select {
	case err := <-gate:
		t.Fatalf("gate opened on an UNKNOWN effect: %v", err)
	default:
	}
	_, err = h.up.Finish(ctx, e.CorrelationID, json.RawMessage(`{"ok":true}`))
	require.NoError(t, err)
	require.NoError(t, <-gate)
}

// TestAsyncForeignCorrelationID: a connector may accept under the upstream's own id. Callbacks
// find the effect by it (and still by the self-routing id); a second effect accepted under an id
// already held is UNKNOWN, not silently merged. Inline Do returns an accepted effect PENDING.
func TestAsyncForeignCorrelationID(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "ext.job", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(_ context.Context, call effects.Call) (json.RawMessage, error) {
			var args struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(call.Args, &args); err != nil {
				return nil, effects.Permanent(err)
			}
			return nil, effects.Accepted(args.ID)
		},
	}))

	first, err := h.client.Do(ctx, effects.Spec{Connector: "ext.job", IdempotencyKey: "ext-1", Args: map[string]any{"id": "ext-42"},
		AsyncTimeout: time.Hour})
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, first.State, "inline: accepted, awaiting callback")
	require.Equal(t, "ext-42", first.CorrelationID)
	require.WithinDuration(t, time.Now().Add(time.Hour), *first.DeadlineAt, time.Minute)

	second, err := h.client.Do(ctx, effects.Spec{Connector: "ext.job", IdempotencyKey: "ext-2", Args: map[string]any{"id": "ext-42"}})
	require.NoError(t, err)
	require.Equal(t, effects.StateUnknown, second.State)
	require.Contains(t, second.Error, "already holds")

	done, err := h.client.Callback(ctx, "ext-42", json.RawMessage(`{"n":1}`), "", nil)
	require.NoError(t, err)
	require.Equal(t, first.ID, done.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	again, err := h.client.Callback(ctx, first.ID.String(), json.RawMessage(`{"n":1}`), "", nil)
	require.NoError(t, err, "the self-routing id names the same effect")
	require.Equal(t, first.ID, again.ID)

	// Accepted with the empty id means the call's own.
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "own.job", Tags: []effects.Tag{effects.TagRead},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") },
	}))
	own, err := h.client.Do(ctx, effects.Spec{Connector: "own.job", IdempotencyKey: "own-1", RunID: "r:with:colons"})
	require.NoError(t, err)
	require.Equal(t, "r:with:colons:"+own.ID.String(), own.CorrelationID)
	run, id, err := effects.ParseCorrelationID(own.CorrelationID)
	require.NoError(t, err)
	require.Equal(t, "r:with:colons", run)
	require.Equal(t, own.ID, id)
	_, err = h.client.Callback(ctx, own.CorrelationID, nil, "gave up", nil)
	require.NoError(t, err)
	failed, err := h.client.Get(ctx, own.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, failed.State)
	require.Equal(t, "gave up", failed.Error)
}

// TestAsyncCallbackForStuckEffect: without a status check, a non-retry-safe async effect whose
// deadline passed becomes STUCK; a callback then is refused (an operator decides) and kept in
// the audit trail.
func TestAsyncCallbackForStuckEffect(t *testing.T) {
	t.Parallel()
	h := setup(t)
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "blind.job", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Unsafe: true,
		AsyncTimeout: 100 * time.Millisecond,
		Dispatch:     func(context.Context, effects.Call) (json.RawMessage, error) { return nil, effects.Accepted("") },
	}))
	h.start()
	ctx := context.Background()
	e, err := h.client.Enqueue(ctx, effects.Spec{Connector: "blind.job", IdempotencyKey: "blind"}, nil)
	require.NoError(t, err)
	stuck := h.wait(e.ID)
	require.Equal(t, effects.StateStuck, stuck.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK"}, h.path(e.ID))

	got, err := h.client.Callback(ctx, stuck.CorrelationID, json.RawMessage(`{"done":true}`), "", nil)
	require.ErrorIs(t, err, effects.ErrCallbackStuck)
	require.Equal(t, effects.StateStuck, got.State)
	history, err := h.client.History(ctx, e.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, effects.StateStuck, last.From)
	require.Equal(t, effects.StateStuck, last.To)
	require.Equal(t, "callback", last.Actor)
	require.JSONEq(t, `{"correlation_id":"`+stuck.CorrelationID+`","reported":"CONFIRMED","result":{"done":true}}`, string(last.Detail))

	// The operator, who can see the callback, resolves it.
	resolved, err := h.client.Resolve(ctx, e.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "callback says done"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, resolved.State)
}

// TestCallbackTenant: a Callback with CallbackOpts.TenantID resolves only the tenant's own effects;
// another tenant's correlation id is ErrUnknownCorrelation, like an unknown one, and leaves no
// trace.
func TestCallbackTenant(t *testing.T) {
	t.Parallel()
	h := setupAsync(t)
	h.start()
	ctx := context.Background()
	effect := h.awaitAccepted(h.enqueueJob("jobs.run", "tenant-cb", func(s *effects.Spec) { s.TenantID = "acme" }).ID)
	before := len(h.reasons(effect.ID))

	_, err := h.client.Callback(ctx, effect.CorrelationID, json.RawMessage(`{"ok":true}`), "", &effects.CallbackOpts{TenantID: "globex"})
	require.ErrorIs(t, err, effects.ErrUnknownCorrelation)
	_, err = h.client.Callback(ctx, effect.CorrelationID, json.RawMessage(`{"ok":true}`), "", &effects.CallbackOpts{TenantID: effects.DefaultTenant})
	require.ErrorIs(t, err, effects.ErrUnknownCorrelation, "the default tenant is a tenant like any other")
	require.Len(t, h.reasons(effect.ID), before, "nothing recorded for another tenant's callback")
	stored, err := h.client.Get(ctx, effect.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, stored.State)

	done, err := h.client.Callback(ctx, effect.CorrelationID, json.RawMessage(`{"ok":true}`), "", &effects.CallbackOpts{TenantID: "acme"})
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, done.State)
	_, err = h.client.Callback(ctx, effect.CorrelationID, nil, "boom", &effects.CallbackOpts{TenantID: "globex"})
	require.ErrorIs(t, err, effects.ErrUnknownCorrelation, "not a conflict either: invisible")
}

// Correlation ids are unique per tenant: two tenants whose upstreams number their jobs alike both
// await their callbacks, each tenant's callback resolves its own effect, and a callback that names
// no tenant refuses to guess.
func TestCorrelationIDsArePerTenant(t *testing.T) {
	t.Parallel()
	h := setup(t)
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "job.submit", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Timeout: time.Second,
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
			return nil, effects.Accepted("upstream-job-42") // each tenant's upstream numbers its own jobs
		},
	}))
	h.start()
	ctx := context.Background()
	awaiting := func(tenant string) *effects.Effect {
		e, err := h.client.Enqueue(ctx, effects.Spec{TenantID: tenant, Connector: "job.submit", IdempotencyKey: "k", Args: map[string]any{}}, nil)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got := h.mustGet(e.ID)
			return got.State != effects.StatePending || got.CorrelationID != ""
		}, 10*time.Second, 20*time.Millisecond)
		got := h.mustGet(e.ID)
		require.Equal(t, effects.StatePending, got.State, "awaiting its callback: %s", got.Error)
		require.Equal(t, "upstream-job-42", got.CorrelationID)
		return got
	}
	acme, globex := awaiting("acme"), awaiting("globex")

	_, err := h.client.Callback(ctx, "upstream-job-42", json.RawMessage(`{"n":0}`), "", nil)
	require.ErrorIs(t, err, effects.ErrUnknownCorrelation, "ambiguous without a tenant")
	got, err := h.client.Callback(ctx, "upstream-job-42", json.RawMessage(`{"n":2}`), "", &effects.CallbackOpts{TenantID: "globex"})
	require.NoError(t, err)
	require.Equal(t, globex.ID, got.ID)
	require.Equal(t, effects.StateConfirmed, got.State)
	require.Equal(t, effects.StatePending, h.mustGet(acme.ID).State, "another tenant's callback touched nothing")
	got, err = h.client.Callback(ctx, "upstream-job-42", nil, "job failed", &effects.CallbackOpts{TenantID: "acme"})
	require.NoError(t, err)
	require.Equal(t, acme.ID, got.ID)
	require.Equal(t, effects.StateFailed, got.State)
}
