package effects_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// A FAILED effect (its retry budget spent on an upstream outage) is redriven by an operator: it is
// PENDING again with a fresh budget and the same idempotency key, a reactor claims and dispatches
// it like a fresh enqueue, and the bank performs it once. The audit trail names the operator and
// the reason; the event stream carries the transition and the new dispatch.
func TestRedriveDispatchesAgainAndConfirms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, MaxAttempts: 2})
	h.start()
	h.bank.Script("outage-1", fakebank.Unavailable, fakebank.Unavailable)

	failed := h.wait(h.enqueue("bank.wire", "outage-1", 10).ID)
	require.Equal(t, effects.StateFailed, failed.State)
	require.Equal(t, 2, failed.Attempts)
	require.Zero(t, h.bank.Count("outage-1"))

	redriven, err := h.client.Redrive(ctx, failed.ID, "alice", "outage over", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, redriven.State)
	require.Zero(t, redriven.Attempts, "a fresh attempt budget")
	require.Equal(t, "outage-1", redriven.IdempotencyKey)

	confirmed := h.wait(failed.ID)
	require.Equal(t, effects.StateConfirmed, confirmed.State)
	require.Equal(t, 1, confirmed.Attempts)
	require.Equal(t, 1, h.bank.Count("outage-1"), "performed once, under the same key")
	require.Equal(t, []string{">PENDING", "PENDING>FAILED", "FAILED>PENDING", "PENDING>CONFIRMED"}, h.path(failed.ID))

	history, err := h.client.History(ctx, failed.ID)
	require.NoError(t, err)
	redrive := history[2]
	require.Equal(t, "operator:alice", redrive.Actor)
	require.Equal(t, "redrive: outage over", redrive.Reason)
	require.Zero(t, redrive.Attempt)
	want, err := json.Marshal(map[string]any{"redrive": true, "attempts_before": 2, "error_before": failed.Error})
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(redrive.Detail))
	require.Equal(t, 1.0, h.metric("reckon_effect_transitions_total",
		map[string]string{"connector": "bank.wire", "policy": string(confirmed.Policy), "from": "FAILED", "to": "PENDING"}))

	// The event stream: the transition back to PENDING (by the operator), then a dispatch, then
	// the outcome.
	rows, err := h.pool.Query(ctx, `SELECT type, coalesce(payload->>'actor', '') FROM reckon_event_log WHERE effect_id = $1 ORDER BY xid, seq`, failed.ID)
	require.NoError(t, err)
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([2]string, error) {
		var e [2]string
		return e, row.Scan(&e[0], &e[1])
	})
	require.NoError(t, err)
	at := slices.Index(events, [2]string{"effect.retried", "operator:alice"})
	require.GreaterOrEqual(t, at, 0, "events: %v", events)
	require.Contains(t, events[at+1:], [2]string{"effect.dispatched", ""}, "events: %v", events)
	require.Equal(t, "tool.executed", events[len(events)-1][0], "events: %v", events)
}

// failEffect moves a PENDING effect to FAILED by raw SQL, as a permanent failure would.
func (h *harness) failEffect(id uuid.UUID) {
	h.t.Helper()
	_, err := h.pool.Exec(context.Background(), `UPDATE reckon_effects SET state = 'FAILED', error = 'rejected',
		transition_actor = 'test', transition_reason = 'rejected' WHERE id = $1 AND state = 'PENDING'`, id)
	require.NoError(h.t, err)
}

// Every refusal of a redrive changes nothing: the effect stays as it was, with no new audit row and
// no dispatch job.
func TestRedriveRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, _ := setupHooked(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true})
	h.wireHeld()
	enqueue := func(spec effects.Spec) *effects.Effect {
		t.Helper()
		spec.Connector, spec.IdempotencyKey, spec.Args = "bank.wire", uuid.NewString(), map[string]any{"account": "acct-1", "amount": 5}
		e, err := h.client.Enqueue(ctx, spec, nil)
		require.NoError(t, err)
		return e
	}

	pending := enqueue(effects.Spec{})

	// A compensation that FAILED.
	original := enqueue(effects.Spec{})
	_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'done' WHERE id = $1`, original.ID)
	require.NoError(t, err)
	compensation, err := h.client.Compensate(ctx, original.ID, "test", "undo", nil)
	require.NoError(t, err)
	h.failEffect(compensation.ID)

	// A declined confirmation.
	held, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.held", IdempotencyKey: "held-1",
		Args: map[string]any{"account": "acct-1", "amount": 5}}, nil)
	require.NoError(t, err)
	_, err = h.client.Decline(ctx, held.ID, "operator:bob", "no", nil)
	require.NoError(t, err)

	owned := enqueue(effects.Spec{Owner: "test"})
	_, err = h.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'FAILED', transition_actor = 'test', transition_reason = 'x' WHERE id = $1`, owned.ID)
	require.NoError(t, err)

	cancelledRun := enqueue(effects.Spec{RunID: "run-cancelled"})
	h.failEffect(cancelledRun.ID)
	_, err = h.client.CancelRun(ctx, "run-cancelled", "test", "stop", nil)
	require.NoError(t, err)

	_, err = h.client.StartRun(ctx, effects.RunSpec{ID: "run-halted", MaxConsecutiveFailures: 1})
	require.NoError(t, err)
	haltedRun := enqueue(effects.Spec{RunID: "run-halted"})
	h.failEffect(haltedRun.ID)

	plain := enqueue(effects.Spec{})
	h.failEffect(plain.ID)

	for name, c := range map[string]struct {
		id   uuid.UUID
		opts *effects.OperatorOpts
		want error
	}{
		"pending":          {pending.ID, nil, effects.ErrNotFailed},
		"confirmed":        {original.ID, nil, effects.ErrNotFailed},
		"compensation":     {compensation.ID, nil, effects.ErrRedriveCompensation},
		"declined":         {held.ID, nil, effects.ErrRedriveDeclined},
		"owned":            {owned.ID, nil, effects.ErrRedriveOwned},
		"run cancelled":    {cancelledRun.ID, nil, effects.ErrRunCancelled},
		"run halted":       {haltedRun.ID, nil, effects.ErrRunMaxFailures},
		"another tenant's": {plain.ID, &effects.OperatorOpts{TenantID: "other"}, effects.ErrNotFound},
		"no such effect":   {uuid.New(), nil, effects.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			before, err := h.client.Get(ctx, c.id)
			if c.want != effects.ErrNotFound {
				require.NoError(t, err)
			}
			beforePath := 0
			if err == nil {
				beforePath = len(h.path(c.id))
			}
			_, err = h.client.Redrive(ctx, c.id, "alice", "again", c.opts)
			require.ErrorIs(t, err, c.want)
			if before == nil {
				return
			}
			after, err := h.client.Get(ctx, c.id)
			require.NoError(t, err)
			require.Equal(t, before.State, after.State)
			require.Equal(t, before.UpdatedAt, after.UpdatedAt)
			require.Len(t, h.path(c.id), beforePath, "a refused redrive writes no audit row")
		})
	}

	// Bad input: no actor, no reason, a NUL byte.
	for _, in := range [][2]string{{"", "why"}, {"alice", ""}, {"alice", "bad\x00reason"}} {
		_, err := h.client.Redrive(ctx, plain.ID, in[0], in[1], nil)
		require.Error(t, err)
	}
	got, err := h.client.Get(ctx, plain.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateFailed, got.State)

	// max_steps does not refuse a redrive (it adds no step); a redriven effect's second redrive
	// is ErrNotFailed.
	_, err = h.client.StartRun(ctx, effects.RunSpec{ID: "run-full", MaxSteps: 1})
	require.NoError(t, err)
	full := enqueue(effects.Spec{RunID: "run-full"})
	h.failEffect(full.ID)
	redriven, err := h.client.Redrive(ctx, full.ID, "alice", "again", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, redriven.State)
	_, err = h.client.Redrive(ctx, full.ID, "alice", "again", nil)
	require.ErrorIs(t, err, effects.ErrNotFailed)
}
