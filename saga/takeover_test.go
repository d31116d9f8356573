package saga_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/saga"
)

// A reactor is SIGKILLed while it runs a saga step's dispatch job, after the bank performed the
// charge and before the step's outcome (and the next step) were written. A live reactor, whose
// in-flight margin is a minute (so the sweeper cannot be what finishes it), takes the job over
// within seconds; the saga completes with every step performed once.
func TestTakeoverOfSagaStep(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	holder := h.startChild("CHILD_CALL_TIMEOUT=1m", "CHILD_IN_FLIGHT_MARGIN=1m")
	var reached <-chan string
	s := h.begin(order{Account: "acct-1", Amount: 100, ShipAmount: 5}, func(id uuid.UUID) {
		reached = h.bank.ArmKey("after-call", saga.StepKey(id, 1))
	})
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("the reactor never reached the charge's checkpoint\n%s", holder.Stderr())
	}
	live := effectsConfig(h.registry)
	live.InFlightMargin = time.Minute
	h.metrics = prometheus.NewRegistry() // the live reactor's own
	live.Registerer = h.metrics
	ec, sc := h.newClientsWith(live, saga.Config{}, 0)
	h.start(ec)

	var jobID int64
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT job_id FROM reckon_effects WHERE idempotency_key = $1`,
		saga.StepKey(s.ID, 1)).Scan(&jobID))
	killed := time.Now()
	testkit.KillAndAwaitTakeover(t, h.pool, holder, jobID, ec.ID())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, err := sc.Wait(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, saga.StateCompleted, done.State, done.Error)
	t.Logf("saga completed %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
	for i := range 3 {
		require.Equal(t, 1, h.bank.Count(saga.StepKey(s.ID, i)), "step %d performed once", i)
	}
	require.Equal(t, int64(205), h.ledgerNet())
	testkit.RequireNoRunningJobs(t, h.pool)
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_dispatch"}))
}
