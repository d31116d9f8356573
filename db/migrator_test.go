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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/postgres"
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

// migratedBefore returns a database of its own with every migration up, then down to the schema
// before version, its migrator, and how many migrations it went down.
func migratedBefore(t *testing.T, version int) (*pgxpool.Pool, *db.Migrator, int) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	migrator := newMigrator(t, pool, nil)
	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	newer := 0
	for _, v := range allVersions(t) {
		if v >= version {
			newer++
		}
	}
	_, err = migrator.Down(ctx, &db.DownOpts{Steps: newer})
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
	var (
		start   = make(chan struct{})
		wg      sync.WaitGroup
		results = make([]*db.Result, migrators)
		errs    = make([]error, migrators)
	)
	for i, migrator := range separateMigrators(t, target, migrators, nil) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = migrator.Up(ctx)
		}()
	}
	close(start)
	wg.Wait()

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
			migrations, err := db.ParseMigrations(tc.files, "m")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, migrations, 2)
			require.Equal(t, "b", migrations[1].Name)
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
