package saga_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/saga"
)

// startChild starts a reactor process (this test binary in child mode) on the harness's database
// and bank, and returns once it runs.
func (h *harness) startChild(env ...string) *proctest.Process {
	h.t.Helper()
	return testkit.StartReactorChild(h.t, childReactorEnv, h.pool, h.bank.URL(), env...)
}

// TestReactorKilledAtEachStepBoundary kills a real reactor process with SIGKILL at each boundary
// of a saga — before a step's call, after it (before the step's outcome and the next step are
// written), and after a compensation's call — and lets a new reactor take over. Every saga
// finishes (COMPLETED or COMPENSATED), no step and no compensation is performed twice, and no step
// has a second effect.
func TestReactorKilledAtEachStepBoundary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		checkpoint string
		key        func(id uuid.UUID) string
		ship       int64
		want       saga.State
		net        int64
	}{
		{"after the reservation's call", "after-call", func(id uuid.UUID) string { return saga.StepKey(id, 0) }, 5, saga.StateCompleted, 205},
		{"before the charge's call", "before-call", func(id uuid.UUID) string { return saga.StepKey(id, 1) }, 5, saga.StateCompleted, 205},
		{"after the charge's call", "after-call", func(id uuid.UUID) string { return saga.StepKey(id, 1) }, 5, saga.StateCompleted, 205},
		{"after the shipment's call", "after-call", func(id uuid.UUID) string { return saga.StepKey(id, 2) }, 5, saga.StateCompleted, 205},
		{"after the release's call", "after-compensate", func(id uuid.UUID) string { return saga.CompensationKey(id, 0, 1, true) }, 0, saga.StateCompensated, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, 0)
			first := h.startChild()
			var reached <-chan string
			s := h.begin(order{Account: "acct-1", Amount: 100, ShipAmount: tc.ship}, func(id uuid.UUID) {
				reached = h.bank.ArmKey(tc.checkpoint, tc.key(id))
			})
			select {
			case got := <-reached:
				require.Equal(t, tc.key(s.ID), got)
			case <-time.After(60 * time.Second):
				t.Fatalf("the reactor never reached the crash point\n%s", first.Stderr())
			}
			first.Signal(t, syscall.SIGKILL)
			first.Wait(t, 10*time.Second)
			held, err := h.sagas.Get(context.Background(), s.ID)
			require.NoError(t, err)
			require.False(t, held.State.Settled(), "the dead reactor left the saga unfinished")

			second := h.startChild()
			done := h.wait(s.ID)
			require.Equal(t, tc.want, done.State, "%s\n%s", done.Error, second.Stderr())

			for i := range 3 {
				want := 1
				if tc.want == saga.StateCompensated && i == 2 {
					want = 0 // the shipment was refused
				}
				require.Equal(t, want, h.bank.Count(saga.StepKey(s.ID, i)), "step %d performed once", i)
			}
			require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE $1 AND compensates_id IS NULL AND idempotency_key NOT LIKE '%/undo-%'`,
				"saga/"+s.ID.String()+"/step-%"), "one effect per step")
			compensations := map[string]int{}
			for _, e := range h.bank.Ledger() {
				if e.Of != "" {
					compensations[e.Key]++
				}
			}
			for key, n := range compensations {
				require.Equal(t, 1, n, "compensation %s performed once", key)
			}
			require.Equal(t, tc.net, h.ledgerNet())
			for _, step := range done.Steps {
				e := h.effect(step.EffectID)
				require.True(t, e.State.Terminal(), "step %d is %s", step.Index, e.State)
			}
			if tc.want == saga.StateCompensated {
				require.Equal(t, effects.StateFailed, h.effect(done.Steps[2].EffectID).State)
			}

			second.Signal(t, syscall.SIGTERM)
			require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
		})
	}
}
