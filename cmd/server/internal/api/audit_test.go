package api_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// TestAuditRecipes runs the recipes of docs/audit.md against effects in known states: each answers
// its question exactly (the right effects, nothing of another tenant or policy).
func TestAuditRecipes(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	require.NoError(t, h.client.Registry().Register(effects.Connector{
		Name: "mail.send", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	}))
	enqueue := func(tenant, connector, key string) uuid.UUID {
		e, err := h.client.Enqueue(ctx, effects.Spec{TenantID: tenant, Connector: connector, IdempotencyKey: key,
			Args: map[string]any{"account": "a-1", "amount": 5}}, nil)
		require.NoError(t, err)
		return e.ID
	}
	move := func(id uuid.UUID, actor, reason string, states ...string) {
		_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET attempts = 1 WHERE id = $1`, id)
		require.NoError(t, err)
		for _, to := range states {
			_, err := h.pool.Exec(ctx, `UPDATE reckon_effects SET state = $2, transition_actor = $3, transition_reason = $4 WHERE id = $1`, id, to, actor, reason)
			require.NoError(t, err)
		}
	}
	wired := enqueue("acme", "bank.wire", "wire-1")
	move(wired, "reactor-1", "dispatched", "CONFIRMED")
	foggy := enqueue("acme", "bank.wire", "wire-2")
	move(foggy, "reactor-1", "status check inconclusive 5 times", "UNKNOWN", "STUCK")
	enqueue("acme", "bank.wire", "wire-3") // queued, never attempted
	mailed := enqueue("acme", "mail.send", "mail-1")
	move(mailed, "reactor-1", "dispatched", "CONFIRMED")
	elsewhere := enqueue("globex", "bank.wire", "wire-1")
	move(elsewhere, "reactor-2", "dispatched", "CONFIRMED")

	ids := func(sql string, args ...any) []uuid.UUID { return auditIDs(t, h, sql, args...) }

	// What irreversible effects ran for a tenant today.
	require.Equal(t, []uuid.UUID{wired}, ids(`
SELECT effect_id, connector, idempotency_key, business_key, at AS confirmed_at, actor
FROM reckon_audit_transitions
WHERE tenant_id = 'acme'
  AND policy = 'irreversible'
  AND to_state = 'CONFIRMED' AND NOT observation
  AND at >= date_trunc('day', now())
ORDER BY at;`))
	require.Equal(t, []uuid.UUID{foggy}, ids(`
SELECT id, connector, idempotency_key, state, attempts, last_reason, last_at
FROM reckon_audit_effects
WHERE tenant_id = 'acme'
  AND policy = 'irreversible'
  AND state IN ('UNKNOWN', 'STUCK')
  AND attempts > 0
  AND last_at >= date_trunc('day', now())
ORDER BY last_at;`))

	// What is stuck, and why.
	var stuckID uuid.UUID
	var stuckBy, stuckReason string
	require.NoError(t, h.pool.QueryRow(ctx, `
SELECT id, stuck_by, stuck_reason
FROM reckon_audit_stuck
ORDER BY stuck_since;`).Scan(&stuckID, &stuckBy, &stuckReason))
	require.Equal(t, foggy, stuckID)
	require.Equal(t, "reactor-1", stuckBy)
	require.Equal(t, "status check inconclusive 5 times", stuckReason)

	// An effect's full history, by id and by key.
	want := []auditStep{{"(new)", "PENDING", "enqueue"}, {"PENDING", "UNKNOWN", "reactor-1"}, {"UNKNOWN", "STUCK", "reactor-1"}}
	require.Equal(t, want, auditSteps(t, h, `
SELECT at, coalesce(from_state::text, '(new)') AS from_state, to_state, actor, reason, attempt,
       observation, detail
FROM reckon_audit_transitions
WHERE effect_id = $1
ORDER BY id;`, foggy))
	require.Equal(t, 3, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_audit_transitions t WHERE t.tenant_id = 'acme' AND t.idempotency_key = 'wire-2'`))

	// The operator's decision shows up as such.
	_, err := h.client.Resolve(ctx, foggy, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "bank statement"}, nil)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{foggy}, ids(`SELECT effect_id FROM reckon_audit_transitions WHERE actor LIKE 'operator:%' AND at >= now() - interval '7 days'`))
	var settled bool
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT settled_at IS NOT NULL FROM reckon_audit_effects WHERE id = $1`, foggy).Scan(&settled))
	require.True(t, settled)
	require.Empty(t, ids(`SELECT id FROM reckon_audit_stuck`))
}

// auditIDs runs an audit query whose first column is an effect's id, and returns the ids.
func auditIDs(t *testing.T, h *harness, sql string, args ...any) []uuid.UUID {
	t.Helper()
	rows, err := h.pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (uuid.UUID, error) {
		values, err := row.Values()
		if err != nil {
			return uuid.Nil, err
		}
		return uuid.UUID(values[0].([16]byte)), nil
	})
	require.NoError(t, err)
	return out
}

// auditStep is a transition of an effect's history, as the history recipe lists it.
type auditStep struct{ From, To, Actor string }

// auditSteps runs the history recipe (at, from, to, actor, reason, attempt, observation, detail)
// and returns its transitions.
func auditSteps(t *testing.T, h *harness, sql string, args ...any) []auditStep {
	t.Helper()
	rows, err := h.pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (auditStep, error) {
		var s auditStep
		var discard any
		err := row.Scan(&discard, &s.From, &s.To, &s.Actor, &discard, &discard, &discard, &discard)
		return s, err
	})
	require.NoError(t, err)
	return out
}
