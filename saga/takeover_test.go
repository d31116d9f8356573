package saga_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/saga"
)

// takeoverBound is how soon after a reactor's SIGKILL a live reactor must have handed its running
// jobs back (LivenessInterval × 2 + TakeoverGrace is 4s with the defaults; the rest is room for a
// loaded test machine). docs/design.md states it.
const takeoverBound = 10 * time.Second

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
	var owner string
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT j.id, j.attempted_by[cardinality(j.attempted_by)]
		FROM reckon_effects e JOIN river_job j ON j.id = e.job_id WHERE e.idempotency_key = $1 AND j.state = 'running'`,
		saga.StepKey(s.ID, 1)).Scan(&jobID, &owner))
	killed := time.Now()
	holder.Signal(t, syscall.SIGKILL)
	holder.Wait(t, 10*time.Second)
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE id = $1 AND state = 'running' AND attempted_by[cardinality(attempted_by)] = $2`, jobID, owner) == 0
	}, takeoverBound, 20*time.Millisecond, "the step's job was not taken over within %v", takeoverBound)
	t.Logf("taken over %v after SIGKILL", time.Since(killed).Round(time.Millisecond))

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
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE state = 'running'`) == 0
	}, 10*time.Second, 20*time.Millisecond, "no River job is left running without a live worker")
	require.Equal(t, 1.0, h.metric("reckon_reactor_jobs_taken_over_total", map[string]string{"kind": "reckon_dispatch"}))
}
