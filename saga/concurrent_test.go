package saga_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/saga"
)

// 200 sagas, started concurrently, run over two reactors at once: every one reaches COMPLETED or
// COMPENSATED as its input decides, each step performed once, each compensated saga netting to
// zero.
func TestConcurrentSagasOverTwoReactors(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	second, _ := h.newClients(prometheus.NewRegistry(), 0)
	h.start(h.effects)
	h.start(second)

	const n = 200
	ids := make([]uuid.UUID, n)
	failing := map[uuid.UUID]bool{}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			o := order{Account: "acct", Amount: int64(i + 1), ShipAmount: 1}
			if i%5 == 0 {
				o.ShipAmount = 0 // the shipment fails: compensated
			}
			errs <- pgx.BeginFunc(context.Background(), h.pool, func(tx pgx.Tx) error {
				s, err := h.sagas.StartTx(context.Background(), tx, "order", o, nil)
				if err == nil {
					ids[i] = s.ID
				}
				return err
			})
		}()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	for i, id := range ids {
		if i%5 == 0 {
			failing[id] = true
		}
	}

	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_sagas WHERE state IN ('COMPLETED', 'COMPENSATED', 'STUCK')`) == n
	}, 120*time.Second, 100*time.Millisecond, "every saga settles")

	for _, id := range ids {
		s, err := h.sagas.Get(context.Background(), id)
		require.NoError(t, err)
		if failing[id] {
			require.Equal(t, saga.StateCompensated, s.State, s.Error)
			require.Equal(t, int64(0), h.bank.Net(saga.StepKey(id, 0)))
			require.Equal(t, int64(0), h.bank.Net(saga.StepKey(id, 1)))
		} else {
			require.Equal(t, saga.StateCompleted, s.State, s.Error)
		}
		for i := range 3 {
			want := 1
			if failing[id] && i == 2 {
				want = 0
			}
			require.Equal(t, want, h.bank.Count(saga.StepKey(id, i)), "saga %s step %d", id, i)
		}
	}
	// Both reactors did work.
	require.Equal(t, 2, h.count(`SELECT count(DISTINCT actor) FROM reckon_effect_transitions WHERE actor LIKE 'reactor:%'`))
	h.eventuallyMetric(float64(n-n/5), "reckon_sagas", map[string]string{"name": "order", "state": "COMPLETED"})
	h.eventuallyMetric(float64(n/5), "reckon_sagas", map[string]string{"name": "order", "state": "COMPENSATED"})
}

// TestDeduplicatedStartRecordsNothing: a saga started again under its start key, one call after
// the other and many at once, is one saga with one start in its history; once its steps have run
// (and, for one of them, its compensations), every effect of it has one insert row and one event,
// and no history or event tells of a saga or an effect that never existed.
func TestDeduplicatedStartRecordsNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	opts := &saga.StartOpts{Key: "order-1"}
	first, err := h.sagas.Start(ctx, "order", order{Account: "k", Amount: 3, ShipAmount: 7}, opts)
	require.NoError(t, err)
	again, err := h.sagas.Start(ctx, "order", order{Account: "k", Amount: 3, ShipAmount: 7}, opts)
	require.NoError(t, err)
	require.True(t, again.Deduplicated)
	require.Equal(t, first.ID, again.ID)

	errs := make([]error, 12)
	testkit.AtOnce(len(errs), func(i int) {
		// order-2 fails at its last step and is compensated: compensations are inserted too.
		key, ship := []string{"order-1", "order-2"}[i%2], []int64{7, 0}[i%2]
		_, err := h.sagas.Start(ctx, "order", order{Account: "k", Amount: 3, ShipAmount: ship}, &saga.StartOpts{Key: key})
		if !errors.Is(err, saga.ErrStartKeyConflict) { // lost the race for a new key: told to start again
			errs[i] = err
		}
	})
	for _, err := range errs {
		require.NoError(t, err)
	}

	h.start(h.effects)
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_sagas WHERE state IN ('COMPLETED', 'COMPENSATED')`) == 2
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_sagas`))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_saga_transitions WHERE from_state IS NULL`))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_event_log WHERE type = 'saga.started'`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_sagas WHERE state = 'COMPENSATED'`))
	effectsOfSteps := h.count(`SELECT count(*) + count(compensation_effect_id) FROM reckon_saga_steps`)
	require.Equal(t, effectsOfSteps, testkit.RequireRecordedOnce(t, h.pool), "one effect per step and compensation")
}
