package db_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// noGhostHistory is the migration that records an effect's insert only when it happens.
const noGhostHistory = 31

// insertSQL inserts an effect as the enqueue does (EffectInsert): ON CONFLICT DO NOTHING.
const insertSQL = `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
	VALUES ($1, 'acme', 'bank.wire', $2, 'idempotent', 'api:test', 'enqueued over the API')
	ON CONFLICT (tenant_id, idempotency_key) DO NOTHING`

// insertConcurrently inserts key n times at once, each with an effect id of its own, and returns
// the ids.
func insertConcurrently(t *testing.T, pool *pgxpool.Pool, key string, n int) []uuid.UUID {
	t.Helper()
	ids, errs := make([]uuid.UUID, n), make([]error, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	testkit.AtOnce(n, func(i int) { _, errs[i] = pool.Exec(context.Background(), insertSQL, ids[i], key) })
	for _, err := range errs {
		require.NoError(t, err)
	}
	return ids
}

// historyCount is how many history rows and how many event log rows name each effect id.
func historyCount(t *testing.T, pool *pgxpool.Pool, ids []uuid.UUID) (history, events map[uuid.UUID]int) {
	t.Helper()
	count := func(sql string) map[uuid.UUID]int {
		out := map[uuid.UUID]int{}
		for _, id := range queryAll[uuid.UUID](t, pool, sql, ids) {
			out[id]++
		}
		return out
	}
	return count(`SELECT effect_id FROM reckon_effect_transitions WHERE effect_id = ANY ($1)`),
		count(`SELECT effect_id FROM reckon_event_log WHERE effect_id = ANY ($1)`)
}

func effectIDs(t *testing.T, pool *pgxpool.Pool) []uuid.UUID {
	t.Helper()
	return queryAll[uuid.UUID](t, pool, `SELECT id FROM reckon_effects ORDER BY id`)
}

// TestDeduplicatedInsertRecordsNothing: an insert that ON CONFLICT skips — one key inserted again
// and again, one after the other and at once, alone and within a statement of many rows — leaves
// no history and no event; each effect that exists has exactly one of each for its insert.
func TestDeduplicatedInsertRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	q := dbsqlc.New(pool)

	var tried []uuid.UUID
	// One after the other, through the enqueue's own query.
	for range 3 {
		id := uuid.New()
		tried = append(tried, id)
		_, err := q.EffectInsert(ctx, dbsqlc.EffectInsertParams{
			ID: id, TenantID: "acme", Connector: "bank.wire", Args: json.RawMessage(`{}`), IdempotencyKey: "sequential",
			Policy: dbsqlc.ReckonEffectPolicyIdempotent, Tags: []string{}, MaxAttempts: 3, TimeoutMs: 1000,
			Actor: "test", Reason: "enqueue", Detail: json.RawMessage(`{"n":1}`),
		})
		if len(tried) > 1 {
			require.ErrorIs(t, err, pgx.ErrNoRows, "deduplicated")
		} else {
			require.NoError(t, err)
		}
	}
	// At once: a key new to all of them, then a key that exists.
	tried = append(tried, insertConcurrently(t, pool, "concurrent", 8)...)
	tried = append(tried, insertConcurrently(t, pool, "sequential", 4)...)
	// Many rows in one statement: a new key twice and an existing one.
	batch := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	tried = append(tried, batch...)
	_, err := pool.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
		SELECT u.id, 'acme', 'bank.wire', u.key, 'idempotent', 'test', 'batch'
		FROM unnest($1::uuid[], $2::text[]) AS u(id, key)
		ON CONFLICT (tenant_id, idempotency_key) DO NOTHING`, batch, []string{"batch", "batch", "concurrent"})
	require.NoError(t, err)

	existing := effectIDs(t, pool)
	require.Len(t, existing, 3, "one effect per key")
	history, events := historyCount(t, pool, tried)
	for _, id := range tried {
		want := 0
		if slices.Contains(existing, id) {
			want = 1
		}
		require.Equal(t, want, history[id], "history rows of %s", id)
		require.Equal(t, want, events[id], "events of %s", id)
	}
	pgtest.RequireNoGhosts(t, pool)
}

// TestInsertInputsUntilFirstTransition: the insert's actor, reason and detail are consumed as
// before (transition_* cleared) and kept in insert_inputs for the AFTER trigger that records them,
// until the first transition clears them; they never stand in for a transition's inputs.
func TestInsertInputsUntilFirstTransition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, q, effect := setupEffect(t)
	require.Nil(t, effect.TransitionActor, "the insert consumes its inputs")
	require.Nil(t, effect.TransitionReason)
	require.JSONEq(t, `{"actor":"test","reason":"enqueue"}`, string(effect.InsertInputs))
	audit := auditOf(t, q, effect.ID)
	require.Len(t, audit, 1)
	require.Nil(t, audit[0].Detail, "no detail: none recorded")

	// Not a transition: nothing recorded, nothing cleared.
	_, err := pool.Exec(ctx, `UPDATE reckon_effects SET attempts = attempts + 1 WHERE id = $1`, effect.ID)
	require.NoError(t, err)
	require.Len(t, auditOf(t, q, effect.ID), 1)

	// A state change that names nothing is refused, as before.
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED' WHERE id = $1`, effect.ID)
	requireTransitionRefused(t, err, "transition PENDING -> CONFIRMED (effect "+effect.ID.String()+") needs transition_actor")
	require.Len(t, auditOf(t, q, effect.ID), 1)

	// The same actor and reason as the insert's name a transition like any other.
	var stored dbsqlc.ReckonEffect
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'enqueue' WHERE id = $1`, effect.ID)
	require.NoError(t, err)
	stored, err = q.EffectGetByID(ctx, effect.ID)
	require.NoError(t, err)
	require.Nil(t, stored.InsertInputs, "cleared by the first transition")
	require.Nil(t, stored.TransitionActor)
	audit = auditOf(t, q, effect.ID)
	require.Len(t, audit, 2)
	require.Equal(t, int32(1), audit[1].Attempt)

	// A detail, and a JSON null detail, are recorded as given.
	for detail, want := range map[string]string{`{"n":1}`: `{"n":1}`, `null`: `null`} {
		id := uuid.New()
		exec(t, pool, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason, transition_detail)
			VALUES ($1, 'acme', 'bank.wire', $2, 'idempotent', 'a', 'r', $3::jsonb)`, id, id.String(), detail)
		audit := auditOf(t, q, id)
		require.Len(t, audit, 1)
		require.JSONEq(t, want, string(audit[0].Detail))
	}

	// Only a PENDING effect holds insert inputs.
	_, err = pool.Exec(ctx, `ALTER TABLE reckon_effects DISABLE TRIGGER reckon_effect_transition`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE reckon_effects SET insert_inputs = '{}' WHERE id = $1`, effect.ID)
	require.ErrorContains(t, err, "reckon_effects_insert_inputs_pending")
}

// TestDeduplicatedDoRecordsInsertBeforeDispatch: an effect inserted with its lease (Do) is recorded
// before it is dispatched in the event stream, and a deduplicated one records neither.
func TestDeduplicatedDoRecordsInsertBeforeDispatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	const leased = `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, attempts,
		lease_owner, lease_token, lease_expires_at, transition_actor, transition_reason)
		VALUES ($1, 'acme', 'bank.wire', 'do-1', 'idempotent', 1, 'me', gen_random_uuid(), now() + interval '1 minute', 'do', 'inline')
		ON CONFLICT (tenant_id, idempotency_key) DO NOTHING`
	first, second := uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{first, second} {
		_, err := pool.Exec(ctx, leased, id)
		require.NoError(t, err)
	}
	rows, err := pool.Query(ctx, `SELECT effect_id, type FROM reckon_event_log WHERE effect_id = ANY ($1) ORDER BY xid, seq`,
		[]uuid.UUID{first, second})
	require.NoError(t, err)
	type event struct {
		EffectID uuid.UUID
		Type     string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[event])
	require.NoError(t, err)
	require.Equal(t, []event{{first, "tool.authorized"}, {first, "effect.dispatched"}}, got)
}

// auditCheckSQL is the check docs/audit.md gives ("Every row tells of something that happened").
func auditCheckSQL(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/audit.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- ghost check -->\\s*```sql\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/audit.md gives the check after <!-- ghost check -->")
	return string(m[1])
}

func auditCheck(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), auditCheckSQL(t))
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		values, err := rows.Values()
		require.NoError(t, err)
		b, err := json.Marshal(values)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	require.NoError(t, rows.Err())
	return out
}

// TestMigrateMarksGhosts: a database made by the code before 0031, whose deduplicated inserts
// left ghosts — one after the other and at once — beside the history of effects retention
// pruned (with and without a tombstone) and a row whose later history retention dropped. The
// upgrade marks the ghosts and nothing else, changes no history row, and the check of
// docs/audit.md then finds nothing; the views and the event stream leave the ghosts out.
func TestMigrateMarksGhosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, migrator, _ := migratedBefore(t, noGhostHistory)

	// The old code's enqueues: each deduplicated one leaves a ghost.
	real := uuid.New()
	exec(t, pool, insertSQL, real, "order-1")
	var ghosts []uuid.UUID
	for range 2 {
		id := uuid.New()
		exec(t, pool, insertSQL, id, "order-1")
		ghosts = append(ghosts, id)
	}
	ghosts = append(ghosts, insertConcurrently(t, pool, "order-1", 4)...)
	racers := insertConcurrently(t, pool, "order-2", 6)
	var winner uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM reckon_effects WHERE idempotency_key = 'order-2'`).Scan(&winner))
	for _, id := range racers {
		if id != winner {
			ghosts = append(ghosts, id)
		}
	}
	// Pruned by retention: settled, then deleted, one with a tombstone.
	pruned := seedEffect(t, pool, "acme", "CONFIRMED")
	tombstoned := seedEffect(t, pool, "acme", "UNKNOWN", "FAILED")
	exec(t, pool, `INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
		VALUES ('acme', $1, $2, 'FAILED', now(), now() + interval '1 day')`, tombstoned.String(), tombstoned)
	exec(t, pool, `DELETE FROM reckon_effects WHERE id = ANY ($1)`, []uuid.UUID{pruned, tombstoned})
	// An insert of two years ago whose later history retention may have dropped: not provably a
	// ghost, so left alone.
	undecided := uuid.New()
	exec(t, pool, `INSERT INTO reckon_effect_transitions (effect_id, tenant_id, to_state, actor, reason, attempt, at)
		VALUES ($1, 'acme', 'PENDING', 'enqueue', 'long ago', 0, now() - interval '2 years')`, undecided)
	exec(t, pool, `INSERT INTO reckon_audit_drops (parent, partition, range_from, range_to, row_count, dropped_by, reason)
		VALUES ('reckon_effect_transitions', 'reckon_effect_transitions_p20241101', now() - interval '23 months',
		        now() - interval '22 months', 10, 'retention:test', 'past the audit retention')`)

	require.Len(t, ghosts, 2+4+5)
	history, _ := historyCount(t, pool, ghosts)
	for _, id := range ghosts {
		require.Equal(t, 1, history[id], "the old trigger recorded the deduplicated insert of %s", id)
	}
	before := historyRows(t, pool, "reckon_effect_transitions")

	_, err := migrator.Up(ctx)
	require.NoError(t, err)

	require.Equal(t, before, historyRows(t, pool, "reckon_effect_transitions"), "no history row changed or removed")
	marked := queryAll[uuid.UUID](t, pool, `SELECT g.effect_id FROM reckon_audit_ghosts g
		JOIN reckon_effect_transitions t ON t.id = g.transition_id AND t.effect_id = g.effect_id AND t.at = g.at
		WHERE g.marked_by = 'migration 0031_no_ghost_history' AND g.reason <> ''`)
	require.ElementsMatch(t, ghosts, marked, "exactly the ghosts are marked")

	require.Empty(t, auditCheck(t, pool), "no unexplained history or event")
	history, events := historyCount(t, pool, ghosts)
	require.Empty(t, events, "the event stream leaves the ghosts out")
	require.Len(t, history, len(ghosts), "the ghost rows stay where they were")
	var inView int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_audit_transitions WHERE effect_id = ANY ($1)`, ghosts).Scan(&inView))
	require.Zero(t, inView, "reckon_audit_transitions leaves the ghosts out")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_audit_transitions WHERE effect_id = ANY ($1)`,
		[]uuid.UUID{real, winner, pruned, tombstoned, undecided}).Scan(&inView))
	require.Equal(t, 1+1+2+3+1, inView, "real history, pruned or not, stays in the view")
	_, events = historyCount(t, pool, []uuid.UUID{real, winner, pruned, tombstoned})
	require.Equal(t, map[uuid.UUID]int{real: 1, winner: 1, pruned: 2, tombstoned: 3}, events)

	// From now on a deduplicated insert records nothing.
	again := uuid.New()
	exec(t, pool, insertSQL, again, "order-1")
	history, _ = historyCount(t, pool, []uuid.UUID{again})
	require.Empty(t, history)

	// The marks are append-only, like the history.
	for _, stmt := range []string{`UPDATE reckon_audit_ghosts SET reason = 'x'`, `DELETE FROM reckon_audit_ghosts`, `TRUNCATE reckon_audit_ghosts`} {
		_, err := pool.Exec(ctx, stmt)
		require.ErrorContains(t, err, "append-only", stmt)
	}

	// Down and up again: the same ghosts are found and marked again.
	_, err = migrator.Down(ctx, &db.DownOpts{Steps: 1})
	require.NoError(t, err)
	require.Equal(t, before, historyRows(t, pool, "reckon_effect_transitions"))
	_, err = migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, len(ghosts), testkit.Count(t, pool, `SELECT count(*) FROM reckon_audit_ghosts`))
	require.Empty(t, auditCheck(t, pool))
}

// TestGhostScan: the scan NewDB runs when a test ends finds history and events about what never
// existed — of an effect, a saga, a turn and a run — and tells them apart from what was deleted.
func TestGhostScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	pgtest.AllowGhosts(t, "ghosts written by hand, to be found")
	ghosts, err := pgtest.Ghosts(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, ghosts)

	// Deleted on purpose: a settled effect (as retention does) is no ghost.
	pruned := seedEffect(t, pool, "acme", "CONFIRMED")
	exec(t, pool, `DELETE FROM reckon_effects WHERE id = $1`, pruned)
	ghosts, err = pgtest.Ghosts(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, ghosts)

	effect, saga, turn := uuid.New(), uuid.New(), uuid.New()
	exec(t, pool, `INSERT INTO reckon_effect_transitions (effect_id, tenant_id, to_state, actor, reason, attempt)
		VALUES ($1, 'acme', 'PENDING', 'enqueue', 'never inserted', 0)`, effect)
	exec(t, pool, `INSERT INTO reckon_saga_transitions (saga_id, to_state, step, actor, reason) VALUES ($1, 'RUNNING', 0, 'test', 'never inserted')`, saga)
	exec(t, pool, `INSERT INTO reckon_events (type, tenant_id, saga_id) VALUES ('saga.started', 'acme', $1)`, saga)
	for _, kind := range []string{"turn.started", "turn.completed"} {
		exec(t, pool, `INSERT INTO reckon_events (type, tenant_id, session_key, turn_id) VALUES ($1, 'acme', 'acme:s', $2)`, kind, turn)
	}
	exec(t, pool, `INSERT INTO reckon_events (type, tenant_id, run_id) VALUES ('run.created', 'acme', 'run-never')`)
	ghosts, err = pgtest.Ghosts(ctx, pool)
	require.NoError(t, err)
	var found []string
	for _, g := range ghosts {
		found = append(found, g.Table+" "+g.Kind+" "+g.Entity+" "+g.What)
	}
	require.ElementsMatch(t, []string{
		"reckon_effect_transitions effect " + effect.String() + " (new) -> PENDING",
		"reckon_saga_transitions saga " + saga.String() + " (new) -> RUNNING",
		"reckon_events saga " + saga.String() + " saga.started",
		"reckon_events turn " + turn.String() + " turn.started",
		"reckon_events turn " + turn.String() + " turn.completed",
		"reckon_events run run-never run.created",
	}, found)
}
