package effects_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// pausedWaiters counts the effects of limited.call waiting in the limits' queue (a paused effect
// that asked and was refused has its row there).
func pausedWaiters(t *testing.T, h *harness, ids ...uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM reckon_limit_waiters WHERE connector = 'limited.call' AND effect_id = ANY ($1)`, ids).Scan(&n))
	return n
}

func enqueueFor(t *testing.T, h *harness, tenant, prefix string, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range n {
		e, err := h.client.Enqueue(context.Background(), effects.Spec{
			Connector: "limited.call", TenantID: tenant, IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i), Args: map[string]int{"n": i},
		}, nil)
		require.NoError(t, err)
		ids[i] = e.ID
	}
	return ids
}

func requireUncalledPending(t *testing.T, h *harness, ids []uuid.UUID) {
	t.Helper()
	for _, id := range ids {
		e, err := h.client.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, effects.StatePending, e.State, id)
		require.Zero(t, e.Attempts, "no attempt spent while paused")
	}
}

func waitConfirmed(t *testing.T, h *harness, ids []uuid.UUID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		e, err := h.client.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, effects.StateConfirmed, e.State, id)
	}
}

// TestPauseHoldsDispatch: while an operator's pause stands, the connector's effects — enqueued or
// Do — wait PENDING, asked and refused, with no attempt spent and nothing reaching the upstream;
// the metric shows the pause, a limit reset does not end it, and a resume lets them all go.
func TestPauseHoldsDispatch(t *testing.T) {
	t.Parallel()
	h, u := setupLimited(t, effects.Limit{})
	ctx := context.Background()
	pause, created, err := h.client.PauseConnector(ctx, "limited.call", "", "operator:ann", "upstream maintenance")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "operator:ann", pause.PausedBy)
	again, created, err := h.client.PauseConnector(ctx, "limited.call", "", "operator:bob", "again")
	require.NoError(t, err)
	require.False(t, created, "a second pause keeps the first")
	require.Equal(t, pause.PausedAt, again.PausedAt)
	require.Equal(t, "upstream maintenance", again.Reason)

	done, err := h.client.Do(ctx, effects.Spec{Connector: "limited.call", IdempotencyKey: "do-paused", Args: map[string]int{"n": 0}})
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, done.State, "Do of a paused connector enqueues instead of calling")

	h.start()
	ids := append(enqueueFor(t, h, "", "paused", 5), done.ID)
	require.Eventually(t, func() bool { return pausedWaiters(t, h, ids...) == len(ids) }, 20*time.Second, 20*time.Millisecond,
		"every effect asked and was held back")
	changed, err := h.client.ResetLimit(ctx, "limited.call")
	require.NoError(t, err)
	require.False(t, changed, "a limit reset does not end an operator's pause")
	require.Greater(t, metricSum(t, h, "reckon_connector_operator_paused_seconds", "limited.call"), 0.0)
	require.Positive(t, metricSumReason(t, h, "limited.call", "operator"))
	calls, _ := u.snapshot()
	require.Empty(t, calls, "nothing reached the upstream while paused")
	requireUncalledPending(t, h, ids)

	resumed, err := h.client.ResumeConnector(ctx, "limited.call", "", "operator:ann", "maintenance over")
	require.NoError(t, err)
	require.True(t, resumed)
	start := time.Now()
	waitConfirmed(t, h, ids)
	t.Logf("all confirmed %v after the resume", time.Since(start))
	require.Equal(t, 0.0, metricSum(t, h, "reckon_connector_operator_paused_seconds", "limited.call"))
	resumed, err = h.client.ResumeConnector(ctx, "limited.call", "", "operator:ann", "twice")
	require.NoError(t, err)
	require.False(t, resumed, "nothing left to resume")

	var log []string
	rows, err := h.pool.Query(ctx, `SELECT action || ' ' || actor || ' ' || reason FROM reckon_connector_pause_log ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		log = append(log, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pause operator:ann upstream maintenance", "resume operator:ann maintenance over"}, log)
}

// TestPauseLetsInFlightFinish: a call in flight when the pause lands finishes and settles; the
// effects after it wait until the resume.
func TestPauseLetsInFlightFinish(t *testing.T) {
	t.Parallel()
	h, u := setupLimited(t, effects.Limit{})
	gate := make(chan struct{})
	u.set(func(u *upstream) { u.gate = gate })
	ctx := context.Background()
	h.start()
	first := enqueueFor(t, h, "", "inflight", 1)
	require.Eventually(t, func() bool { calls, _ := u.snapshot(); return len(calls) == 1 }, 20*time.Second, 10*time.Millisecond)
	_, _, err := h.client.PauseConnector(ctx, "limited.call", "", "operator:ann", "INC-7")
	require.NoError(t, err)
	later := enqueueFor(t, h, "", "later", 3)
	close(gate)
	waitConfirmed(t, h, first)
	require.Eventually(t, func() bool { return pausedWaiters(t, h, later...) == len(later) }, 20*time.Second, 20*time.Millisecond)
	calls, _ := u.snapshot()
	require.Len(t, calls, 1, "only the call in flight was made")
	requireUncalledPending(t, h, later)
	_, err = h.client.ResumeConnector(ctx, "limited.call", "", "operator:ann", "")
	require.NoError(t, err)
	waitConfirmed(t, h, later)
}

// TestPausePerTenant: a tenant's pause holds that tenant's effects only; resuming the pause of
// every tenant (there is none) leaves it; resuming the tenant's lets them go.
func TestPausePerTenant(t *testing.T) {
	t.Parallel()
	h, u := setupLimited(t, effects.Limit{MaxInFlight: 1}) // a cap shared by every tenant
	ctx := context.Background()
	_, _, err := h.client.PauseConnector(ctx, "limited.call", "acme", "operator:ann", "acme's account under review")
	require.NoError(t, err)
	h.start()
	held := enqueueFor(t, h, "acme", "acme", 3)
	free := enqueueFor(t, h, "globex", "globex", 3)
	waitConfirmed(t, h, free) // not held back behind acme's under the shared cap
	require.Eventually(t, func() bool { return pausedWaiters(t, h, held...) == len(held) }, 20*time.Second, 20*time.Millisecond)
	requireUncalledPending(t, h, held)
	calls, _ := u.snapshot()
	require.Len(t, calls, len(free))

	pauses, err := h.client.ConnectorPauses(ctx)
	require.NoError(t, err)
	require.Len(t, pauses, 1)
	require.Equal(t, "acme", pauses[0].TenantID)
	resumed, err := h.client.ResumeConnector(ctx, "limited.call", "", "operator:ann", "")
	require.NoError(t, err)
	require.False(t, resumed, "no pause of every tenant")
	requireUncalledPending(t, h, held)
	resumed, err = h.client.ResumeConnector(ctx, "limited.call", "acme", "operator:ann", "review done")
	require.NoError(t, err)
	require.True(t, resumed)
	waitConfirmed(t, h, held)
}

// TestPauseRefusesBadInput: a name, tenant, actor or reason Postgres cannot store is refused,
// naming the field, and nothing is paused.
func TestPauseRefusesBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	for _, c := range []struct{ connector, tenant, reason, want string }{
		{"", "", "r", "connector"},
		{"c\x00", "", "r", "connector"},
		{"c", "bad \xff", "r", "tenant_id"},
		{"c", "", "nul \x00", "reason"},
	} {
		_, _, err := h.client.PauseConnector(ctx, c.connector, c.tenant, "ops", c.reason)
		require.ErrorIs(t, err, effects.ErrInvalidLimit, c.want)
		require.ErrorContains(t, err, c.want)
		_, err = h.client.ResumeConnector(ctx, c.connector, c.tenant, "ops", c.reason)
		require.ErrorIs(t, err, effects.ErrInvalidLimit, c.want)
	}
	pauses, err := h.client.ConnectorPauses(ctx)
	require.NoError(t, err)
	require.Empty(t, pauses)
}

// metricSumReason is reckon_connector_limit_waits_total of connector for reason.
func metricSumReason(t *testing.T, h *harness, connector, reason string) float64 {
	t.Helper()
	families, err := h.metrics.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "reckon_connector_limit_waits_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["connector"] == connector && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
