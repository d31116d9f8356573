package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	pending   = dbsqlc.ReckonEffectStatePENDING
	confirmed = dbsqlc.ReckonEffectStateCONFIRMED
	failed    = dbsqlc.ReckonEffectStateFAILED
	unknown   = dbsqlc.ReckonEffectStateUNKNOWN
	stuck     = dbsqlc.ReckonEffectStateSTUCK
)

// legalTransitions is the table of docs/design.md, written out here independently of the
// database so that the test checks the schema against the design.
var legalTransitions = map[[2]dbsqlc.ReckonEffectState]bool{
	{pending, confirmed}: true,
	{pending, failed}:    true,
	{pending, unknown}:   true,
	{unknown, confirmed}: true,
	{unknown, pending}:   true,
	{unknown, failed}:    true,
	{unknown, stuck}:     true,
	{stuck, confirmed}:   true,
	{stuck, failed}:      true,
	{stuck, pending}:     true,
}

// pathFromPending is a legal way to bring a new effect to each state.
var pathFromPending = map[dbsqlc.ReckonEffectState][]dbsqlc.ReckonEffectState{
	pending:   nil,
	confirmed: {confirmed},
	failed:    {failed},
	unknown:   {unknown},
	stuck:     {unknown, stuck},
}

func insertEffect(t *testing.T, q *dbsqlc.Queries) dbsqlc.ReckonEffect {
	t.Helper()
	effect, err := q.EffectInsert(context.Background(), dbsqlc.EffectInsertParams{
		ID:             uuid.New(),
		TenantID:       "tenant-a",
		Connector:      "bank.wire",
		Args:           json.RawMessage(`{"amount":100}`),
		IdempotencyKey: uuid.NewString(),
		Policy:         dbsqlc.ReckonEffectPolicyIrreversible,
		Tags:           []string{"write", "external"},
		MaxAttempts:    3,
		TimeoutMs:      1000,
		Actor:          "test",
		Reason:         "enqueue",
	})
	require.NoError(t, err)
	return effect
}

// setupEffect gives a test a database of its own with one effect, inserted by insertEffect.
func setupEffect(t *testing.T) (*pgxpool.Pool, *dbsqlc.Queries, dbsqlc.ReckonEffect) {
	t.Helper()
	pool := pgtest.NewDB(t)
	q := dbsqlc.New(pool)
	return pool, q, insertEffect(t, q)
}

func transition(ctx context.Context, q *dbsqlc.Queries, id uuid.UUID, from, to dbsqlc.ReckonEffectState, reason string) (dbsqlc.ReckonEffect, error) {
	return q.EffectTransition(ctx, dbsqlc.EffectTransitionParams{
		ID: id, FromState: from, ToState: to, Actor: "tester", Reason: reason,
		Detail: json.RawMessage(fmt.Sprintf(`{"reason":%q}`, reason)),
	})
}

func auditOf(t *testing.T, q *dbsqlc.Queries, id uuid.UUID) []dbsqlc.ReckonEffectTransition {
	t.Helper()
	rows, err := q.EffectTransitionListByEffects(context.Background(), []uuid.UUID{id})
	require.NoError(t, err)
	return rows
}

func requireTransitionRefused(t *testing.T, err error, want string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want a Postgres error, got %v", err)
	require.Equal(t, pgerrcode.CheckViolation, pgErr.Code)
	require.Equal(t, "reckon_effect_transition", pgErr.ConstraintName)
	require.Contains(t, pgErr.Message, want)
}

func TestStateMachineAllPairs(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	q := dbsqlc.New(pool)
	states := dbsqlc.AllReckonEffectStateValues()
	require.Len(t, states, 5)

	for _, from := range states {
		for _, to := range states {
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				effect := insertEffect(t, q)
				current := pending
				for _, next := range pathFromPending[from] {
					_, err := transition(ctx, q, effect.ID, current, next, "setup")
					require.NoError(t, err)
					current = next
				}
				before := auditOf(t, q, effect.ID)
				require.Len(t, before, 1+len(pathFromPending[from]))

				moved, err := transition(ctx, q, effect.ID, from, to, "under test")
				after := auditOf(t, q, effect.ID)
				stored, getErr := q.EffectGetByID(ctx, effect.ID)
				require.NoError(t, getErr)

				if legalTransitions[[2]dbsqlc.ReckonEffectState{from, to}] {
					require.NoError(t, err)
					require.Equal(t, to, moved.State)
					require.Equal(t, to, stored.State)
					require.Len(t, after, len(before)+1, "one audit row per transition")
					row := after[len(after)-1]
					require.Equal(t, from, *row.FromState)
					require.Equal(t, to, row.ToState)
					require.Equal(t, "tester", row.Actor)
					require.Equal(t, "under test", row.Reason)
					require.Equal(t, "tenant-a", row.TenantID)
					require.JSONEq(t, `{"reason":"under test"}`, string(row.Detail))
					require.Nil(t, stored.TransitionActor, "the trigger consumes its inputs")
					require.Nil(t, stored.TransitionReason)
					require.Nil(t, stored.TransitionDetail)
					return
				}
				requireTransitionRefused(t, err, fmt.Sprintf("illegal effect transition %s -> %s (effect %s)", from, to, effect.ID))
				require.Equal(t, from, stored.State, "a refused transition changes nothing")
				require.Equal(t, before, after, "a refused transition writes no audit row")
			})
		}
	}
}

func TestStateMachineInsertIsAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, q, effect := setupEffect(t)
	audit := auditOf(t, q, effect.ID)
	require.Len(t, audit, 1)
	require.Nil(t, audit[0].FromState)
	require.Equal(t, pending, audit[0].ToState)
	require.Equal(t, "test", audit[0].Actor)
	require.Equal(t, "enqueue", audit[0].Reason)
	require.Equal(t, int32(0), audit[0].Attempt)

	// Effects are born PENDING.
	_, err := pool.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, state, transition_actor, transition_reason)
		VALUES ($1, 't', 'c', 'born-confirmed', 'pure', 'CONFIRMED', 'test', 'x')`, uuid.New())
	requireTransitionRefused(t, err, "illegal effect transition (new) -> CONFIRMED")

	// Every insert and transition names an actor and a reason.
	_, err = pool.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy)
		VALUES ($1, 't', 'c', 'anonymous', 'pure')`, uuid.New())
	requireTransitionRefused(t, err, "needs transition_actor and transition_reason")
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED' WHERE id = $1`, effect.ID)
	requireTransitionRefused(t, err, "transition PENDING -> CONFIRMED (effect "+effect.ID.String()+") needs transition_actor")
	require.Len(t, auditOf(t, q, effect.ID), 1)
	var count int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effects`).Scan(&count))
	require.Equal(t, 1, count, "refused inserts leave nothing behind")
}

func TestStateMachineNonTransitionUpdates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, q, effect := setupEffect(t)

	// Taking a lease and counting an attempt is not a transition: allowed, not audited.
	tag, err := pool.Exec(ctx, `UPDATE reckon_effects
		SET attempts = attempts + 1, lease_owner = 'r1', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'
		WHERE id = $1`, effect.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
	require.Len(t, auditOf(t, q, effect.ID), 1)

	// The attempt count at a transition is recorded with it.
	_, err = transition(ctx, q, effect.ID, pending, unknown, "timeout")
	require.NoError(t, err)
	audit := auditOf(t, q, effect.ID)
	require.Len(t, audit, 2)
	require.Equal(t, int32(1), audit[1].Attempt)

	// A partial lease is refused by its own constraint.
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET lease_token = NULL WHERE id = $1`, effect.ID)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "reckon_effects_lease_complete", pgErr.ConstraintName)
}

func TestStateMachineUnknownTag(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	_, err := dbsqlc.New(pool).EffectInsert(context.Background(), dbsqlc.EffectInsertParams{
		ID: uuid.New(), TenantID: "t", Connector: "c", Args: json.RawMessage(`{}`), IdempotencyKey: "k",
		Policy: dbsqlc.ReckonEffectPolicyPure, Tags: []string{"read", "teleport"}, MaxAttempts: 1, TimeoutMs: 1000,
		Actor: "test", Reason: "enqueue",
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, pgerrcode.CheckViolation, pgErr.Code)
	require.Equal(t, "reckon_effects_tags_check", pgErr.ConstraintName)
}

func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, q, effect := setupEffect(t)
	_, err := transition(ctx, q, effect.ID, pending, unknown, "timeout")
	require.NoError(t, err)
	before := auditOf(t, q, effect.ID)
	require.Len(t, before, 2)

	for _, stmt := range []string{
		`UPDATE reckon_effect_transitions SET reason = 'rewritten' WHERE effect_id = $1`,
		`UPDATE reckon_effect_transitions SET to_state = 'CONFIRMED' WHERE effect_id = $1`,
		`DELETE FROM reckon_effect_transitions WHERE effect_id = $1`,
		`DELETE FROM reckon_effect_transitions WHERE effect_id = $1 OR true`,
		`TRUNCATE reckon_effect_transitions`,
	} {
		t.Run(stmt, func(t *testing.T) {
			var err error
			if stmt == `TRUNCATE reckon_effect_transitions` {
				_, err = pool.Exec(ctx, stmt)
			} else {
				_, err = pool.Exec(ctx, stmt, effect.ID)
			}
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, pgerrcode.InsufficientPrivilege, pgErr.Code)
			require.Contains(t, pgErr.Message, "reckon_effect_transitions is append-only")
			require.Equal(t, before, auditOf(t, q, effect.ID))
		})
	}
}

// FAILED -> PENDING (a redrive, 0037) is the one transition that depends on its writer: the
// trigger allows it to an operator actor only. Any other actor, by any statement, is refused, and
// nothing is written.
func TestStateMachineRedriveOnlyByOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, q, effect := setupEffect(t)
	_, err := transition(ctx, q, effect.ID, pending, failed, "rejected")
	require.NoError(t, err)
	before := auditOf(t, q, effect.ID)

	for _, actor := range []string{"tester", "reactor:r1", "operator", "operator:", "api:token/operator:x", "OPERATOR:alice"} {
		_, err := pool.Exec(ctx, `UPDATE reckon_effects SET state = 'PENDING', transition_actor = $2, transition_reason = 'again'
			WHERE id = $1`, effect.ID, actor)
		requireTransitionRefused(t, err, fmt.Sprintf("illegal effect transition FAILED -> PENDING (effect %s): only an operator redrives", effect.ID))
	}
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'PENDING' WHERE id = $1`, effect.ID)
	requireTransitionRefused(t, err, "only an operator redrives")
	stored, err := q.EffectGetByID(ctx, effect.ID)
	require.NoError(t, err)
	require.Equal(t, failed, stored.State)
	require.Equal(t, before, auditOf(t, q, effect.ID), "a refused redrive writes no audit row")

	// An operator may; the audit row names them. Without a reason it is still refused.
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'PENDING', transition_actor = 'operator:alice' WHERE id = $1`, effect.ID)
	requireTransitionRefused(t, err, "needs transition_actor and transition_reason")
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'PENDING', transition_actor = 'operator:alice', transition_reason = 'outage over'
		WHERE id = $1`, effect.ID)
	require.NoError(t, err)
	after := auditOf(t, q, effect.ID)
	require.Len(t, after, len(before)+1)
	row := after[len(after)-1]
	require.Equal(t, failed, *row.FromState)
	require.Equal(t, pending, row.ToState)
	require.Equal(t, "operator:alice", row.Actor)
	require.Equal(t, "outage over", row.Reason)

	// CONFIRMED stays terminal for operators too.
	_, err = transition(ctx, q, effect.ID, pending, confirmed, "done")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'PENDING', transition_actor = 'operator:alice', transition_reason = 'again'
		WHERE id = $1`, effect.ID)
	requireTransitionRefused(t, err, "illegal effect transition CONFIRMED -> PENDING")
}
