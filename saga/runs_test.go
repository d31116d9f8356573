package saga_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
)

// runHarness has connectors that count their calls: ok and undo succeed, fail is refused, flaky
// keeps answering "not applied, try later".
type runHarness struct {
	effects *effects.Client
	sagas   *saga.Client
	calls   sync.Map // connector → *atomic.Int64
}

func (r *runHarness) count(name string) int64 {
	v, _ := r.calls.LoadOrStore(name, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

func setupRuns(t *testing.T, def saga.Definition) *runHarness {
	t.Helper()
	pool := pgtest.NewDB(t)
	r := &runHarness{}
	registry := effects.NewRegistry()
	add := func(name string, answer func() (json.RawMessage, error), backoff time.Duration) {
		registry.MustRegister(effects.Connector{
			Name: name, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Timeout: time.Second,
			Backoff: func(int) time.Duration { return backoff },
			Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) {
				v, _ := r.calls.LoadOrStore(name, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				return answer()
			},
		})
	}
	ok := func() (json.RawMessage, error) { return json.RawMessage(`{"ok":true}`), nil }
	add("ok", ok, 10*time.Millisecond)
	add("undo", ok, 10*time.Millisecond)
	add("fail", func() (json.RawMessage, error) { return nil, effects.Permanent(errors.New("refused")) }, 10*time.Millisecond)
	add("flaky", func() (json.RawMessage, error) { return nil, effects.Retryable(errors.New("503: try later")) }, 5*time.Second)
	sc, err := saga.NewClient(pool, &saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	config := testkit.FastConfig(registry)
	config.Workers, config.InFlightMargin, config.Plugins = 4, time.Second, []effects.Plugin{sc}
	ec, err := effects.NewClient(pool, config)
	require.NoError(t, err)
	require.NoError(t, sc.Register(def))
	r.effects, r.sagas = ec, sc
	require.NoError(t, ec.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ec.Stop(ctx)
	})
	return r
}

func step(connector, run string) func(saga.Input) (effects.Spec, error) {
	return func(saga.Input) (effects.Spec, error) {
		return effects.Spec{Connector: connector, RunID: run, Args: map[string]any{"x": 1}}, nil
	}
}

func (r *runHarness) wait(t *testing.T, id saga.Saga) *saga.Saga {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := r.sagas.Wait(ctx, id.ID)
	require.NoError(t, err)
	return s
}

// A run's guardrail stops the run, never what undoes it: the failed step's run has reached its
// consecutive-failure limit, yet the confirmed step is compensated and the saga COMPENSATED.
func TestRunGuardrailDoesNotBlockCompensation(t *testing.T) {
	t.Parallel()
	r := setupRuns(t, saga.Definition{Name: "g", CompensationAttempts: 3, Steps: []saga.Step{
		{Name: "a", Effect: step("ok", "run-1"), Undo: saga.UndoWith(step("undo", "run-1"))},
		{Name: "b", Effect: step("fail", "run-1"), Undo: saga.NoUndo()},
	}})
	ctx := context.Background()
	_, err := r.effects.StartRun(ctx, effects.RunSpec{ID: "run-1", MaxConsecutiveFailures: 1})
	require.NoError(t, err)
	s, err := r.sagas.Start(ctx, "g", nil, nil)
	require.NoError(t, err)
	done := r.wait(t, *s)
	require.Equal(t, saga.StateCompensated, done.State, "stuck: %s", done.StuckReason)
	require.Equal(t, int64(1), r.count("undo"))
	run, err := r.effects.GetRun(ctx, "run-1", nil)
	require.NoError(t, err)
	require.NotNil(t, run.Halted, "the run itself is halted by its guardrail")
}

// Cancelling a saga's run fails its step that has not taken effect; the saga then compensates
// the confirmed step — the cancellation does not stop the undo.
func TestCancelledRunStillCompensates(t *testing.T) {
	t.Parallel()
	r := setupRuns(t, saga.Definition{Name: "c", Steps: []saga.Step{
		{Name: "a", Effect: step("ok", "run-3"), Undo: saga.UndoWith(step("undo", "run-3"))},
		{Name: "b", Effect: step("flaky", "run-3"), Undo: saga.NoUndo()},
	}})
	ctx := context.Background()
	s, err := r.sagas.Start(ctx, "c", nil, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.count("flaky") >= 1 }, 10*time.Second, 10*time.Millisecond)
	// Once the attempt is recorded (a retry is scheduled), the step has provably not taken effect.
	require.Eventually(t, func() bool {
		run, err := r.effects.GetRun(ctx, "run-3", nil)
		return err == nil && run != nil
	}, 10*time.Second, 10*time.Millisecond)
	var cancelled *effects.RunCancellation
	require.Eventually(t, func() bool {
		cancelled, err = r.effects.CancelRun(ctx, "run-3", "ops", "user aborted", nil)
		return err == nil && len(cancelled.Failed) == 1
	}, 10*time.Second, 50*time.Millisecond, "the flaky step is failed by the cancellation: %v", err)
	done := r.wait(t, *s)
	require.Equal(t, saga.StateCompensated, done.State, "stuck: %s", done.StuckReason)
	require.Equal(t, int64(1), r.count("undo"))
	require.Equal(t, int64(1), r.count("flaky"), "not tried again after the cancellation")
}
