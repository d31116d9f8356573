package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// auditPartitions is the migration that partitions the audit histories.
const auditPartitions = 16

var histories = []string{"reckon_effect_transitions", "reckon_saga_transitions", "reckon_definition_changes"}

// historyRows returns every row of table as text, in id order: what an upgrade must keep.
func historyRows(t *testing.T, pool *pgxpool.Pool, table string) []string {
	t.Helper()
	// xid (migration 0027, the event stream) is NULL on rows written before it: not compared.
	return queryAll[string](t, pool, fmt.Sprintf(`SELECT (to_jsonb(h) - 'xid')::text FROM %s h ORDER BY id`, pgx.Identifier{table}.Sanitize()))
}

func relkind(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	var kind string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT relkind::text FROM pg_class WHERE oid = $1::regclass`, table).Scan(&kind))
	return kind
}

// seedEffect inserts an effect through the transition trigger and moves it along path, so that
// its audit rows are written the way the engine writes them.
func seedEffect(t *testing.T, pool *pgxpool.Pool, tenant string, path ...string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	exec(t, pool, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
		VALUES ($1, $2, 'bank.wire', $3, 'idempotent', 'test', 'seeded')`, id, tenant, id.String())
	for _, state := range path {
		exec(t, pool, `UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'moved' WHERE id = $1`, id, state)
	}
	return id
}

// TestAuditPartitionsUpgrade: a database on the schema before 0016 that holds history — effect
// transitions of this month and of two years ago, saga transitions, definition changes — is
// upgraded: every row is kept as it was (ids included), the histories are partitioned, the old
// rows sit in the first partition, new rows get larger ids, and every partition refuses UPDATE,
// DELETE and TRUNCATE. A saga's history outlives the saga. Going down keeps every row too.
func TestAuditPartitionsUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, migrator, newer := migratedBefore(t, auditPartitions)
	for _, table := range histories {
		require.Equal(t, "r", relkind(t, pool, table), "%s is a plain table before 0016", table)
	}

	confirmed := seedEffect(t, pool, "acme", "CONFIRMED")
	stuck := seedEffect(t, pool, "acme", "UNKNOWN", "STUCK")
	// History from long ago, as an older deployment would hold it.
	exec(t, pool, `INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, at)
		VALUES ($1, 'acme', NULL, 'PENDING', 'test', 'old', 0, now() - interval '2 years')`, uuid.New())
	sagaID := uuid.New()
	exec(t, pool, `INSERT INTO reckon_sagas (id, tenant_id, name, step_count) VALUES ($1, 'acme', 'refund', 1)`, sagaID)
	exec(t, pool, `INSERT INTO reckon_saga_transitions (saga_id, from_state, to_state, step, actor, reason)
		VALUES ($1, NULL, 'RUNNING', 0, 'test', 'started'), ($1, 'RUNNING', 'COMPLETED', 0, 'test', 'done')`, sagaID)
	exec(t, pool, `INSERT INTO reckon_definition_changes (kind, name, action, actor, definition)
		VALUES ('connector', 'bank.wire', 'create', 'cli:ops', '{"url":"http://127.0.0.1:1"}')`)

	before := map[string][]string{}
	for _, table := range histories {
		before[table] = historyRows(t, pool, table)
		require.NotEmpty(t, before[table])
	}

	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	for _, table := range histories {
		require.Equal(t, "p", relkind(t, pool, table), "%s is partitioned", table)
		require.Equal(t, before[table], historyRows(t, pool, table), "%s keeps every row as it was", table)
		var inFirst int
		require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s_p0`, table)).Scan(&inFirst))
		require.Equal(t, len(before[table]), inFirst, "the old rows are the first partition of %s", table)
	}

	// The engine goes on writing where the old ids ended.
	var lastOld, firstNew int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) FROM reckon_effect_transitions`).Scan(&lastOld))
	exec(t, pool, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'operator:ops', transition_reason = 'resolved' WHERE id = $1`, stuck)
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(id) FROM reckon_effect_transitions WHERE effect_id = $1`, stuck).Scan(&firstNew))
	require.Greater(t, firstNew, lastOld)
	requireAppendOnly(t, pool)

	// Without its foreign key, a deleted saga leaves its history.
	exec(t, pool, `DELETE FROM reckon_sagas WHERE id = $1`, sagaID)
	var sagaRows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_saga_transitions WHERE saga_id = $1`, sagaID).Scan(&sagaRows))
	require.Equal(t, 2, sagaRows)

	// Down keeps the effects' and the definitions' history (a pruned saga's history has no place
	// in the old schema, whose foreign key it would break).
	after := historyRows(t, pool, "reckon_effect_transitions")
	_, err = migrator.Down(ctx, &db.DownOpts{Steps: newer})
	require.NoError(t, err)
	require.Equal(t, "r", relkind(t, pool, "reckon_effect_transitions"))
	require.Equal(t, after, historyRows(t, pool, "reckon_effect_transitions"))
	require.Equal(t, before["reckon_definition_changes"], historyRows(t, pool, "reckon_definition_changes"))
	require.Empty(t, historyRows(t, pool, "reckon_saga_transitions"))
	_, err = pool.Exec(ctx, `DELETE FROM reckon_effect_transitions WHERE effect_id = $1`, confirmed)
	requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
	_, err = migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, after, historyRows(t, pool, "reckon_effect_transitions"))
}

func requireSQLState(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
}

// requireAppendOnly checks that UPDATE, DELETE and TRUNCATE are refused on every history, through
// its parent and on each partition, the default one included, and that nothing changed.
func requireAppendOnly(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for _, parent := range histories {
		before := historyRows(t, pool, parent)
		tables := queryAll[string](t, pool, `SELECT partition FROM reckon_audit_partitions WHERE parent = $1`, parent)
		require.GreaterOrEqual(t, len(tables), 2, "the first partition and the ones made ahead")
		tables = append(tables, parent, parent+"_default")
		for _, table := range tables {
			name := pgx.Identifier{table}.Sanitize()
			var rows int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+name).Scan(&rows))
			for _, stmt := range []string{`UPDATE ` + name + ` SET actor = 'rewritten'`, `DELETE FROM ` + name} {
				tag, err := pool.Exec(ctx, stmt)
				if rows == 0 { // a row trigger has no row to refuse: nothing to change
					require.NoError(t, err)
					require.Zero(t, tag.RowsAffected())
					continue
				}
				requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
			}
			_, err := pool.Exec(ctx, `TRUNCATE `+name)
			requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
		}
		require.Equal(t, before, historyRows(t, pool, parent))
	}
}

type partition struct {
	Name     string
	From, To *time.Time
}

func partitionsOf(t *testing.T, pool *pgxpool.Pool, parent string) []partition {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT partition, range_from, range_to FROM reckon_audit_partitions WHERE parent = $1 ORDER BY range_to`, parent)
	require.NoError(t, err)
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partition, error) {
		var p partition
		return p, row.Scan(&p.Name, &p.From, &p.To)
	})
	require.NoError(t, err)
	return parts
}

func insertTransitionAt(t *testing.T, pool *pgxpool.Pool, at time.Time) (id int64, table string) {
	t.Helper()
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, at)
		VALUES ($1, 'acme', NULL, 'PENDING', 'test', 'seeded', 0, $2)
		RETURNING id, tableoid::regclass::text`, uuid.New(), at).Scan(&id, &table))
	return id, table
}

func monthStart(at time.Time) time.Time {
	at = at.UTC()
	return time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// TestAuditPartitionsAhead: partitions exist ahead of the clock, one per calendar month (UTC),
// without gaps; a row of a month that has no partition yet is kept by the default partition (the
// insert never fails) and moves into its partition when that is made; changing to daily
// partitions cuts the next ones per day.
func TestAuditPartitionsAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	pgtest.AllowGhosts(t, "history rows inserted by hand, of effects that do not exist, to fill partitions")
	const parent = "reckon_effect_transitions"

	parts := partitionsOf(t, pool, parent)
	require.Nil(t, parts[0].From, "the first partition starts at the beginning")
	now := time.Now()
	require.True(t, parts[len(parts)-1].To.After(now.Add(55*24*time.Hour)), "about two months ahead: %v", parts[len(parts)-1].To)

	// Across the year's end and beyond: the clock moved 14 months on.
	later := now.AddDate(0, 14, 0)
	var created int
	require.NoError(t, pool.QueryRow(ctx, `SELECT reckon_audit_ensure_partitions($1, $2)`, parent, later).Scan(&created))
	require.Greater(t, created, 10)
	parts = partitionsOf(t, pool, parent)
	for i := 1; i < len(parts); i++ {
		require.Equal(t, *parts[i-1].To, *parts[i].From, "no gap before %s", parts[i].Name)
		require.Equal(t, monthStart(*parts[i].From), parts[i].From.UTC(), "%s starts on the first of a month", parts[i].Name)
		require.Equal(t, monthStart(*parts[i].From).AddDate(0, 1, 0), parts[i].To.UTC(), "%s is one month", parts[i].Name)
		require.Equal(t, parent+"_p"+parts[i].From.UTC().Format("20060102"), parts[i].Name)
	}
	require.True(t, parts[len(parts)-1].To.After(later))
	for _, month := range []time.Time{now, now.AddDate(0, 1, 0), monthStart(now.AddDate(1, 0, 0)).Add(-time.Nanosecond * 1000), monthStart(now.AddDate(1, 0, 0))} {
		_, table := insertTransitionAt(t, pool, month)
		require.NotEqual(t, parent+"_default", table, "%v has its partition", month)
	}
	// Run again with the same clock: nothing to do.
	require.NoError(t, pool.QueryRow(ctx, `SELECT reckon_audit_ensure_partitions($1, $2)`, parent, later).Scan(&created))
	require.Zero(t, created)

	// Past the horizon: the default partition takes the row, and gives it up to its partition.
	far := later.AddDate(0, 6, 0)
	id, table := insertTransitionAt(t, pool, far)
	require.Equal(t, parent+"_default", table)
	total := len(historyRows(t, pool, parent))
	require.NoError(t, pool.QueryRow(ctx, `SELECT reckon_audit_ensure_partitions($1, $2)`, parent, far).Scan(&created))
	// The months from the horizon of the run at later to that of the run at far, each the default
	// premake (62 days) ahead: five or six, by the day of the month the test runs on.
	premake := 62 * 24 * time.Hour
	from, to := monthStart(later.Add(premake)), monthStart(far.Add(premake))
	require.Equal(t, (to.Year()-from.Year())*12+int(to.Month()-from.Month()), created)
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM reckon_effect_transitions WHERE id = $1`, id).Scan(&table))
	require.Equal(t, parent+"_p"+monthStart(far).Format("20060102"), table, "the row moved to its month")
	require.Len(t, historyRows(t, pool, parent), total, "nothing lost or doubled")
	var inDefault int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effect_transitions_default`).Scan(&inDefault))
	require.Zero(t, inDefault)

	// Daily from here on.
	exec(t, pool, `UPDATE reckon_audit_settings SET period = 'day', premake = '3 days'`)
	last := partitionsOf(t, pool, parent)
	end := *last[len(last)-1].To
	require.NoError(t, pool.QueryRow(ctx, `SELECT reckon_audit_ensure_partitions($1, $2)`, parent, end.Add(48*time.Hour)).Scan(&created))
	require.Equal(t, 5, created, "two days past the last partition's end plus three ahead")
	parts = partitionsOf(t, pool, parent)
	for _, p := range parts[len(last):] {
		require.Equal(t, 24*time.Hour, p.To.Sub(*p.From), p.Name)
	}
	requireAppendOnly(t, pool)
}

// TestAuditPartitionDrop: a partition is dropped only once it ends before the cutoff and no
// effect it tells of is left; the drop is recorded with its range, rows and who did it, and that
// record is append-only.
func TestAuditPartitionDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	const parent = "reckon_effect_transitions"
	effect := seedEffect(t, pool, "acme", "CONFIRMED")
	first := partitionsOf(t, pool, parent)[0]
	future := first.To.Add(24 * time.Hour)

	drop := func(name string, cutoff time.Time) (*int64, error) {
		var n *int64
		err := pool.QueryRow(ctx, `SELECT reckon_audit_drop_partition($1, $2, 'retention:test', 'past the audit retention')`, name, cutoff).Scan(&n)
		return n, err
	}
	_, err := drop(first.Name, first.To.Add(-time.Second))
	requireSQLState(t, err, pgerrcode.InvalidParameterValue)
	_, err = drop("reckon_effects", future)
	requireSQLState(t, err, pgerrcode.UndefinedTable)

	n, err := drop(first.Name, future)
	require.NoError(t, err)
	require.Nil(t, n, "held: the effect it tells of exists")
	require.Len(t, historyRows(t, pool, parent), 2)

	exec(t, pool, `DELETE FROM reckon_effects WHERE id = $1`, effect)
	n, err = drop(first.Name, future)
	require.NoError(t, err)
	require.NotNil(t, n)
	require.Equal(t, int64(2), *n)
	require.Empty(t, historyRows(t, pool, parent))
	require.Equal(t, "", relkindOrEmpty(t, pool, first.Name), "the partition is gone")

	var row struct {
		Parent, Partition, By, Reason string
		From                          *time.Time
		To                            time.Time
		Rows                          int64
	}
	require.NoError(t, pool.QueryRow(ctx, `SELECT parent, partition, range_from, range_to, row_count, dropped_by, reason FROM reckon_audit_drops`).
		Scan(&row.Parent, &row.Partition, &row.From, &row.To, &row.Rows, &row.By, &row.Reason))
	require.Equal(t, parent, row.Parent)
	require.Equal(t, first.Name, row.Partition)
	require.Nil(t, row.From)
	require.True(t, first.To.Equal(row.To))
	require.Equal(t, int64(2), row.Rows)
	require.Equal(t, "retention:test", row.By)
	for _, stmt := range []string{`UPDATE reckon_audit_drops SET row_count = 0`, `DELETE FROM reckon_audit_drops`, `TRUNCATE reckon_audit_drops`} {
		_, err := pool.Exec(ctx, stmt)
		requireSQLState(t, err, pgerrcode.InsufficientPrivilege)
	}
	// The engine keeps writing to the partitions that are left.
	seedEffect(t, pool, "acme")
}

func relkindOrEmpty(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	var kind *string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1))`, table).Scan(&kind))
	if kind == nil {
		return ""
	}
	return *kind
}
