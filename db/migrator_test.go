package db_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func allVersions(t *testing.T) []int {
	t.Helper()
	migrations, err := db.Migrations()
	require.NoError(t, err)
	var versions []int
	for _, m := range migrations {
		versions = append(versions, m.Version)
	}
	return versions
}

// newMigrator returns a migrator of pool configured by cfg, which NewMigrator must accept.
func newMigrator(t *testing.T, pool *pgxpool.Pool, cfg *db.MigratorConfig) *db.Migrator {
	t.Helper()
	migrator, err := db.NewMigrator(pool, cfg)
	require.NoError(t, err)
	return migrator
}

// schemaObjects lists the tables and types Reckon and River own in the database.
// separateMigrators returns n migrators of target's database configured by cfg, each with a pool
// of its own, as separate processes would have.
func separateMigrators(t *testing.T, target *pgxpool.Pool, n int, cfg *db.MigratorConfig) []*db.Migrator {
	t.Helper()
	migrators := make([]*db.Migrator, n)
	for i := range migrators {
		pool, err := pgxpool.New(context.Background(), target.Config().ConnString())
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		migrators[i] = newMigrator(t, pool, cfg)
	}
	return migrators
}

// migrated returns a database of its own with every migration up, and its migrator.
func migrated(t *testing.T) (*pgxpool.Pool, *db.Migrator) {
	t.Helper()
	pool := pgtest.NewEmptyDB(t)
	migrator := newMigrator(t, pool, nil)
	_, err := migrator.Up(context.Background())
	require.NoError(t, err)
	return pool, migrator
}

// migratedBefore returns a database of its own with every migration up, then down to the schema
// before version, its migrator, and how many migrations it went down.
func migratedBefore(t *testing.T, version int) (*pgxpool.Pool, *db.Migrator, int) {
	t.Helper()
	pool, migrator := migrated(t)
	newer := 0
	for _, v := range allVersions(t) {
		if v >= version {
			newer++
		}
	}
	_, err := migrator.Down(context.Background(), &db.DownOpts{Steps: newer})
	require.NoError(t, err)
	return pool, migrator, newer
}

func schemaObjects(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	return queryAll[string](t, pool, `
		SELECT 'table ' || tablename FROM pg_tables WHERE schemaname = 'public' AND (tablename LIKE 'reckon%' OR tablename LIKE 'river%')
		UNION ALL
		SELECT 'type ' || typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE n.nspname = 'public' AND t.typtype = 'e'
		UNION ALL
		SELECT 'function ' || proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public' AND (proname LIKE 'reckon%' OR proname LIKE 'river%')
		ORDER BY 1`)
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	require.Empty(t, schemaObjects(t, pool))
	migrator := newMigrator(t, pool, nil)

	status, err := migrator.Status(ctx)
	require.NoError(t, err)
	require.False(t, status.Current())
	require.Len(t, status.Pending, len(allVersions(t)))
	require.Zero(t, status.RiverApplied)

	first, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, allVersions(t), first.Reckon)
	require.NotEmpty(t, first.River)
	migrated := schemaObjects(t, pool)
	require.Contains(t, migrated, "table reckon_effects")
	require.Contains(t, migrated, "table reckon_effect_transitions")
	require.Contains(t, migrated, "table river_job")
	require.Contains(t, migrated, "type reckon_effect_state")

	status, err = migrator.Status(ctx)
	require.NoError(t, err)
	require.True(t, status.Current())
	require.Len(t, status.Applied, len(allVersions(t)))
	require.Equal(t, len(first.River), status.RiverApplied)

	again, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Empty(t, again.Reckon, "a second up applies nothing")
	require.Empty(t, again.River)

	// One step down rolls back the newest migration only.
	down, err := migrator.Down(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, allVersions(t)[len(allVersions(t))-1:], down.Reckon)
	require.Empty(t, down.River)
	status, err = migrator.Status(ctx)
	require.NoError(t, err)
	require.Len(t, status.Pending, 1)
	_, err = migrator.Up(ctx)
	require.NoError(t, err)

	// All the way down leaves nothing of Reckon or River behind…
	down, err = migrator.Down(ctx, &db.DownOpts{All: true})
	require.NoError(t, err)
	reversed := slices.Clone(allVersions(t))
	slices.Reverse(reversed)
	require.Equal(t, reversed, down.Reckon)
	require.Len(t, down.River, len(first.River))
	require.Empty(t, schemaObjects(t, pool))

	// …and up again rebuilds the same schema.
	second, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, first.Reckon, second.Reckon)
	require.Equal(t, first.River, second.River)
	require.Equal(t, migrated, schemaObjects(t, pool))

	_, err = migrator.Down(ctx, &db.DownOpts{Steps: -1})
	require.ErrorContains(t, err, "steps must be positive")
}

// TestMigrateConcurrently starts four migrators, each with its own pool as separate processes
// would have, against one empty database at once: all succeed and every migration is applied by
// exactly one of them.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := pgtest.NewEmptyDB(t)

	const migrators = 4
	results, errs := make([]*db.Result, migrators), make([]error, migrators)
	separate := separateMigrators(t, target, migrators, nil)
	testkit.AtOnce(migrators, func(i int) { results[i], errs[i] = separate[i].Up(ctx) })

	var reckon, river []int
	for i := range migrators {
		require.NoError(t, errs[i], "migrator %d", i)
		reckon = append(reckon, results[i].Reckon...)
		river = append(river, results[i].River...)
	}
	slices.Sort(reckon)
	require.Equal(t, allVersions(t), reckon, "each migration applied exactly once")
	require.Equal(t, len(river), len(slices.Compact(slices.Sorted(slices.Values(river)))), "each River version applied once")

	var rows int
	require.NoError(t, target.QueryRow(ctx, `SELECT count(*) FROM reckon_schema_migrations`).Scan(&rows))
	require.Equal(t, len(allVersions(t)), rows)
}

func TestEnsureDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	existing := pgtest.NewEmptyDB(t)

	created, err := db.EnsureDatabase(ctx, existing.Config().ConnString())
	require.NoError(t, err)
	require.False(t, created, "an existing database is left alone")

	url := postgres.WithDatabase(existing.Config().ConnString(), existing.Config().ConnConfig.Database+"_ensured")
	t.Cleanup(func() {
		_, err := existing.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{existing.Config().ConnConfig.Database + "_ensured"}.Sanitize()+` WITH (FORCE)`)
		require.NoError(t, err)
	})
	created, err = db.EnsureDatabase(ctx, url)
	require.NoError(t, err)
	require.True(t, created)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	_, err = db.EnsureDatabase(ctx, "postgres://127.0.0.1:1/")
	require.ErrorContains(t, err, "names no database")
}

// parseTwo parses the migrations in directory "m" of files, which name two when they parse. With
// wantErr set, it requires ParseMigrations to fail with that error and returns nil.
func parseTwo(t *testing.T, files fstest.MapFS, wantErr string) []db.Migration {
	t.Helper()
	migrations, err := db.ParseMigrations(files, "m")
	if wantErr != "" {
		require.ErrorContains(t, err, wantErr)
		return nil
	}
	require.NoError(t, err)
	require.Len(t, migrations, 2)
	return migrations
}

func TestParseMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name    string
		files   fstest.MapFS
		wantErr string
	}{
		{"ok", fstest.MapFS{"m/0001_a.up.sql": file("up"), "m/0001_a.down.sql": file("down"), "m/0002_b.up.sql": file("up"), "m/0002_b.down.sql": file("down")}, ""},
		{"gap", fstest.MapFS{"m/0001_a.up.sql": file("up"), "m/0001_a.down.sql": file("down"), "m/0003_b.up.sql": file("up"), "m/0003_b.down.sql": file("down")}, ""},
		{"zero", fstest.MapFS{"m/0000_a.up.sql": file("up"), "m/0000_a.down.sql": file("down")}, "start at 0001, found 0000_a"},
		{"no down", fstest.MapFS{"m/0001_a.up.sql": file("up")}, "needs both an .up.sql and a .down.sql"},
		{"bad name", fstest.MapFS{"m/1_a.sql": file("up")}, `migration file "1_a.sql": name must look like`},
		{"two names", fstest.MapFS{"m/0001_a.up.sql": file("up"), "m/0001_b.down.sql": file("down")}, "has two names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if migrations := parseTwo(t, tc.files, tc.wantErr); migrations != nil {
				require.Equal(t, "b", migrations[1].Name)
			}
		})
	}
}

// TestMigrateLogsOneLine: migrating a fresh database logs one info line, not one per River and
// Reckon version; a database already current logs nothing. The versions one by one are at debug.
func TestMigrateLogsOneLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	var info, debug bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&info, nil))
	require.NoError(t, db.Migrate(ctx, pool, logger))
	lines := strings.Split(strings.TrimSpace(info.String()), "\n")
	require.Len(t, lines, 1, info.String())
	require.Contains(t, lines[0], `msg="applied migrations" river_versions="[1 2 3`)
	require.Contains(t, lines[0], "reckon_versions=\"[1 2 3")

	info.Reset()
	require.NoError(t, db.Migrate(ctx, pool, logger))
	require.Empty(t, info.String(), "nothing to apply, nothing to say")

	// At debug level Reckon's migrations are listed one by one (River's info lines stay out).
	fresh := pgtest.NewEmptyDB(t)
	require.NoError(t, db.Migrate(ctx, fresh, slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.Equal(t, len(allVersions(t)), strings.Count(debug.String(), `msg="applied migration" `), debug.String())
	require.NotContains(t, debug.String(), "rivermigrate")
}

const marker = "-- reckon:no-transaction\n"

func TestParseNoTransaction(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	pair := func(up, down string) fstest.MapFS {
		return fstest.MapFS{"m/0001_a.up.sql": file("CREATE TABLE t (a int);"), "m/0001_a.down.sql": file("DROP TABLE t;"),
			"m/0002_b.up.sql": file(up), "m/0002_b.down.sql": file(down)}
	}
	const create, drop = "CREATE INDEX CONCURRENTLY i ON t (a);\n", "DROP INDEX CONCURRENTLY i;\n"
	for _, tc := range []struct {
		name    string
		files   fstest.MapFS
		wantNoT bool
		wantErr string
	}{
		{"both marked", pair(marker+create, marker+drop), true, ""},
		{"CRLF and trailing spaces", pair("-- reckon:no-transaction  \r\n"+create, marker+drop), true, ""},
		{"neither", pair(create, drop), false, ""},
		{"dollar quotes in a transaction", pair("DO $$ BEGIN END $$;", "SELECT 1;"), false, ""},
		{"up only", pair(marker+create, drop), false, `"-- reckon:no-transaction" starts only one of its files`},
		{"down only", pair(create, marker+drop), false, "starts only one of its files"},
		{"not the first line", pair("-- header\n"+marker+create, "-- header\n"+marker+drop), false, "0002_b.down.sql: \"-- reckon:no-transaction\" must be the whole first line"},
		{"more on the line", pair("-- reckon:no-transaction please\n"+create, marker+drop), false, "must be the whole first line"},
		{"$$", pair(marker+"DO $$ BEGIN END $$;\n", marker+drop), false, "0002_b.up.sql (no transaction): dollar quote $$"},
		{"$tag$", pair(marker+create, marker+"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$;\n"), false, "0002_b.down.sql (no transaction): dollar quote $body$"},
		{"block comment", pair(marker+"/* the index */\n"+create, marker+drop), false, "block comment"},
		{"two on a line", pair(marker+"DROP INDEX CONCURRENTLY i; CREATE INDEX CONCURRENTLY i ON t (a);\n", marker+drop), false, `line 2: a ";" must end its line`},
		{"comment after ;", pair(marker+"DROP INDEX CONCURRENTLY i; -- first\n", marker+drop), false, `line 2: a ";" must end its line`},
		{"no final ;", pair(marker+"CREATE INDEX CONCURRENTLY i ON t (a)\n", marker+drop), false, `the last statement does not end with ";"`},
		{"marker only", pair(marker+"-- nothing\n", marker+drop), false, "no statement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if migrations := parseTwo(t, tc.files, tc.wantErr); migrations != nil {
				require.False(t, migrations[0].NoTransaction)
				require.Equal(t, tc.wantNoT, migrations[1].NoTransaction)
			}
		})
	}
}

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	statements, err := db.SplitStatements(marker + `-- A header comment; with a semicolon in it.

DROP INDEX CONCURRENTLY IF EXISTS i;
CREATE INDEX CONCURRENTLY i ON t (a)   
    -- a comment inside
    WHERE a > 0 ;  
CREATE INDEX CONCURRENTLY j ON t (b);` + "\r\n\r\n-- trailing comment\n")
	require.NoError(t, err)
	require.Equal(t, []string{
		"DROP INDEX CONCURRENTLY IF EXISTS i;",
		"CREATE INDEX CONCURRENTLY i ON t (a)\n    WHERE a > 0 ;",
		"CREATE INDEX CONCURRENTLY j ON t (b);",
	}, statements)

	// Reckon's own no-transaction migrations follow the rule (ParseMigrations checks it), and
	// 0017 is one of them.
	migrations, err := db.Migrations()
	require.NoError(t, err)
	var noTransaction []int
	for _, m := range migrations {
		if m.NoTransaction {
			noTransaction = append(noTransaction, m.Version)
		}
	}
	require.Contains(t, noTransaction, 17)
}

// testMigrations are a table, and a no-transaction migration that builds a unique index on it
// concurrently after an ordinary one: the file follows the rule of Migration's doc (a drop before
// each build), so that it can run again after a failure.
func testMigrations() []db.Migration {
	return []db.Migration{
		{Version: 1, Name: "table", Up: `CREATE TABLE notx (a int, b int)`, Down: `DROP TABLE notx`},
		{Version: 2, Name: "indexes", NoTransaction: true,
			Up: marker + `DROP INDEX CONCURRENTLY IF EXISTS notx_b_idx;
CREATE INDEX CONCURRENTLY notx_b_idx ON notx (b);
DROP INDEX CONCURRENTLY IF EXISTS notx_a_uniq;
CREATE UNIQUE INDEX CONCURRENTLY notx_a_uniq ON notx (a);
`,
			Down: marker + `DROP INDEX CONCURRENTLY IF EXISTS notx_a_uniq;
DROP INDEX CONCURRENTLY IF EXISTS notx_b_idx;
`},
	}
}

// indexes maps the names of the indexes on table to whether each is valid (pg_index.indisvalid).
func indexes(t *testing.T, pool *pgxpool.Pool, table string) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1)`, table)
	require.NoError(t, err)
	found := map[string]bool{}
	var name string
	var valid bool
	_, err = pgx.ForEachRow(rows, []any{&name, &valid}, func() error {
		found[name] = valid
		return nil
	})
	require.NoError(t, err)
	return found
}

func recordedVersions(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	return queryAll[int](t, pool, `SELECT version FROM reckon_schema_migrations ORDER BY version`)
}

func TestNoTransactionUpDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	migrator := newMigrator(t, pool, nil)
	db.SetMigrations(migrator, testMigrations())

	result, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, result.Reckon)
	require.Equal(t, map[string]bool{"notx_a_uniq": true, "notx_b_idx": true}, indexes(t, pool, "notx"))
	require.Equal(t, []int{1, 2}, recordedVersions(t, pool))

	result, err = migrator.Down(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []int{2}, result.Reckon)
	require.Empty(t, indexes(t, pool, "notx"))
	require.Equal(t, []int{1}, recordedVersions(t, pool))

	result, err = migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{2}, result.Reckon)
	require.Equal(t, map[string]bool{"notx_a_uniq": true, "notx_b_idx": true}, indexes(t, pool, "notx"))
}

// TestNoTransactionFailure: a statement that fails leaves the ones before it done, an INVALID
// index and the migration unrecorded; once the cause is gone, the next Up runs the whole file
// again and succeeds, the drop first clearing the invalid index.
func TestNoTransactionFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	migrator := newMigrator(t, pool, nil)
	migrations := testMigrations()
	db.SetMigrations(migrator, migrations[:1])
	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO notx (a, b) VALUES (1, 1), (1, 2)`)
	require.NoError(t, err)

	db.SetMigrations(migrator, migrations)
	result, err := migrator.Up(ctx)
	require.ErrorContains(t, err, "migration 0002_indexes up: statement 4 of 4, outside a transaction (the ones before it stay done): ERROR: could not create unique index")
	require.Empty(t, result.Reckon)
	require.Equal(t, map[string]bool{"notx_b_idx": true, "notx_a_uniq": false}, indexes(t, pool, "notx"))
	require.Equal(t, []int{1}, recordedVersions(t, pool))

	_, err = pool.Exec(ctx, `DELETE FROM notx WHERE b = 2`)
	require.NoError(t, err)
	result, err = migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{2}, result.Reckon)
	require.Equal(t, map[string]bool{"notx_b_idx": true, "notx_a_uniq": true}, indexes(t, pool, "notx"))
	require.Equal(t, []int{1, 2}, recordedVersions(t, pool))
}

// TestRetentionIndexes: migration 0017 builds its indexes valid, and rolling it back drops them.
func TestRetentionIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	want := map[string]string{
		"reckon_effects_settled_idx":     "reckon_effects",
		"reckon_sagas_finished_idx":      "reckon_sagas",
		"reckon_runs_updated_idx":        "reckon_runs",
		"reckon_turns_finished_idx":      "reckon_turns",
		"reckon_turns_superseded_by_idx": "reckon_turns",
	}
	check := func(present bool) {
		t.Helper()
		for index, table := range want {
			valid, ok := indexes(t, pool, table)[index]
			require.Equal(t, present, ok, index)
			require.Equal(t, present, valid, index)
		}
	}
	check(true)

	migrator := newMigrator(t, pool, nil)
	migrations, err := db.Migrations()
	require.NoError(t, err)
	i := slices.IndexFunc(migrations, func(m db.Migration) bool { return m.Version == 17 })
	require.GreaterOrEqual(t, i, 0)
	// Roll back 0017 only, whatever migrations come after it.
	_, err = migrator.Down(ctx, &db.DownOpts{Steps: len(migrations) - i})
	require.NoError(t, err)
	check(false)
	_, err = migrator.Up(ctx)
	require.NoError(t, err)
	check(true)
}

// syncBuffer is a bytes.Buffer that loggers of several goroutines can share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lockedEmptyDB returns an empty database of its own whose migration lock a connection of the test
// holds, as a migrating process would, and the function that lets go of it. The connection goes
// back to the pool when the test ends.
func lockedEmptyDB(t *testing.T) (*pgxpool.Pool, func()) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(holder.Release)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyMigrate)
	require.NoError(t, err)
	return pool, func() {
		t.Helper()
		_, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyMigrate)
		require.NoError(t, err)
	}
}

// TestMigrateWaitersDoNotBlockConcurrentIndexes: migrators that wait for the lock while another
// builds indexes concurrently do not hold it up. The test holds the migration lock until three
// migrators (each with its own pool, as separate processes would have) all say they wait, then
// lets go: one migrates everything, 0017's CREATE INDEX CONCURRENTLY included, while the other two
// wait. Had they blocked in pg_advisory_lock, their snapshots would have held up that build, and
// the deadlock detector would have killed one side.
func TestMigrateWaitersDoNotBlockConcurrentIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, unlock := lockedEmptyDB(t)

	const migrators = 3
	var (
		logs    syncBuffer
		wg      sync.WaitGroup
		results = make([]*db.Result, migrators)
		errs    = make([]error, migrators)
	)
	for i, migrator := range separateMigrators(t, target, migrators, &db.MigratorConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))}) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrator.Up(ctx)
		}()
	}
	require.Eventually(t, func() bool {
		return strings.Count(logs.String(), "waiting for another migrator") == migrators
	}, 10*time.Second, 10*time.Millisecond, logs.String())
	unlock()
	wg.Wait()

	var reckon []int
	for i := range migrators {
		require.NoError(t, errs[i], "migrator %d", i)
		reckon = append(reckon, results[i].Reckon...)
	}
	slices.Sort(reckon)
	require.Equal(t, allVersions(t), reckon, "each migration applied exactly once")
	require.Equal(t, allVersions(t), recordedVersions(t, target))
	require.Equal(t, map[string]bool{"reckon_turns_finished_idx": true, "reckon_turns_superseded_by_idx": true},
		filterRetention(indexes(t, target, "reckon_turns")))
}

func filterRetention(found map[string]bool) map[string]bool {
	kept := map[string]bool{}
	for name, valid := range found {
		if strings.HasSuffix(name, "_finished_idx") || strings.HasSuffix(name, "_superseded_by_idx") {
			kept[name] = valid
		}
	}
	return kept
}

// TestMigrateLockWaitEndsWithContext: a migrator waiting for the lock gives up when its context
// ends, and leaves the lock to its holder.
func TestMigrateLockWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, unlock := lockedEmptyDB(t)

	migrator := newMigrator(t, target, &db.MigratorConfig{Logger: slog.New(slog.DiscardHandler)})
	waitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err := migrator.Up(waitCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "migrate: take advisory lock")
	require.Empty(t, schemaObjects(t, target), "nothing migrated")

	unlock()
	_, err = migrator.Up(ctx)
	require.NoError(t, err)
}
