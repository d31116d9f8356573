package db_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// TestMigrationRetriesOnLockTimeout: a migration that needs a table the running code holds waits
// at most LockTimeout, is rolled back (so a writer queued behind it goes on at once instead of
// waiting for the holder) and runs again, whole, until it gets the table; each run again is logged.
// The same for a statement of a NoTransaction migration. Past MaxRetryWait the lock timeout is
// returned and the migration stays pending.
func TestMigrationRetriesOnLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	var logs syncBuffer
	migrator := newMigrator(t, pool, &db.MigratorConfig{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), LockTimeout: 200 * time.Millisecond,
	})
	migrations := []db.Migration{
		{Version: 1, Name: "hot", Up: `CREATE TABLE hot (a int)`, Down: `DROP TABLE hot`},
		{Version: 2, Name: "column", Up: `ALTER TABLE hot ADD COLUMN b int; ALTER TABLE hot ADD COLUMN c int`,
			Down: `ALTER TABLE hot DROP COLUMN b, DROP COLUMN c`},
		{Version: 3, Name: "notx", NoTransaction: true,
			Up:   marker + "ALTER TABLE hot ADD COLUMN IF NOT EXISTS d int;\n",
			Down: marker + "ALTER TABLE hot DROP COLUMN IF EXISTS d;\n"},
	}
	db.SetMigrations(migrator, migrations[:1])
	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	db.SetMigrations(migrator, migrations)

	// The running code: a transaction that writes the table and holds it for 1.5 s.
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `INSERT INTO hot (a) VALUES (1)`)
	require.NoError(t, err)
	held := time.Now()
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_ = holder.Commit(ctx)
	}()

	// Another writer arrives while the migration waits: it waits at most about LockTimeout (the
	// migration's rollback lets it through), not until the holder commits.
	writerDone := make(chan time.Duration, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		_, err := pool.Exec(ctx, `INSERT INTO hot (a) VALUES (2)`)
		if err != nil {
			writerDone <- -1
			return
		}
		writerDone <- time.Since(start)
	}()

	result, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, result.Reckon)
	require.GreaterOrEqual(t, time.Since(held), 1400*time.Millisecond, "applied only once the holder committed")
	waited := <-writerDone
	require.GreaterOrEqual(t, waited, time.Duration(0), "the writer failed")
	require.Less(t, waited, time.Second, "a writer behind the migration waits about LockTimeout, not for the holder")
	out := logs.String()
	require.Contains(t, out, "migration lost a lock to the running code; rolled back, running it again")
	require.Contains(t, out, "version=2")
	require.Contains(t, out, "SQLSTATE 55P03")
	require.Equal(t, []int{1, 2, 3}, recordedVersions(t, pool))

	// A NoTransaction statement runs again alone.
	_, err = migrator.Down(ctx, nil)
	require.NoError(t, err)
	holder, err = pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `INSERT INTO hot (a) VALUES (3)`)
	require.NoError(t, err)
	go func() {
		time.Sleep(800 * time.Millisecond)
		_ = holder.Commit(ctx)
	}()
	before := strings.Count(logs.String(), "version=3")
	result, err = migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{3}, result.Reckon)
	require.Greater(t, strings.Count(logs.String(), "version=3"), before, "the statement's runs again are logged")
	require.Contains(t, logs.String(), "statement=1")

	// A holder that never lets go: the migration gives up at MaxRetryWait, pending.
	short := newMigrator(t, pool, &db.MigratorConfig{Logger: slog.New(slog.DiscardHandler),
		LockTimeout: 100 * time.Millisecond, MaxRetryWait: time.Second})
	db.SetMigrations(short, migrations)
	_, err = short.Down(ctx, &db.DownOpts{Steps: 2})
	require.NoError(t, err)
	holder, err = pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `LOCK TABLE hot IN ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	start := time.Now()
	_, err = short.Up(ctx)
	require.ErrorContains(t, err, "migration 0002_column up")
	require.ErrorContains(t, err, "SQLSTATE 55P03")
	require.Less(t, time.Since(start), 3*time.Second)
	require.Equal(t, []int{1}, recordedVersions(t, pool))
}

// TestMigrationLockTimeoutIsLocal: the lock_timeout of a migration does not outlive it on the
// pooled connection that ran it.
func TestMigrationLockTimeoutIsLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	migrator := newMigrator(t, pool, &db.MigratorConfig{Logger: slog.New(slog.DiscardHandler), LockTimeout: 1234 * time.Millisecond})
	db.SetMigrations(migrator, []db.Migration{
		{Version: 1, Name: "t", Up: `CREATE TABLE t (a int)`, Down: `DROP TABLE t`},
		{Version: 2, Name: "notx", NoTransaction: true, Up: marker + "ALTER TABLE t ADD COLUMN IF NOT EXISTS b int;\n",
			Down: marker + "ALTER TABLE t DROP COLUMN IF EXISTS b;\n"},
	})
	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	conns := pool.AcquireAllIdle(ctx)
	require.NotEmpty(t, conns)
	for _, conn := range conns {
		var setting string
		require.NoError(t, conn.QueryRow(ctx, `SHOW lock_timeout`).Scan(&setting))
		require.NotEqual(t, "1234ms", setting)
		conn.Release()
	}
}

// TestMigrationLockPhaseYieldsToWriters: 0027 runs while a writer of the previous version works.
// The writer holds one hot table and then asks for another; the writer is never the deadlock
// victim and commits, and the migration applies:
//   - settle order (reckon_effects, then the history): 0027 takes them in that order too, so it
//     simply waits for the writer (before 0027 took its locks in the order of its statements, the
//     history first, and the two deadlocked);
//   - the opposite order: they wait for each other, and 0027's lock phase gives up first (55P03,
//     within half of deadlock_timeout), is run again, and applies.
func TestMigrationLockPhaseYieldsToWriters(t *testing.T) {
	t.Parallel()
	all, err := db.Migrations()
	require.NoError(t, err)
	before := 0
	for before < len(all) && all[before].Version < 27 {
		before++
	}
	for _, order := range [][2]string{
		{"reckon_effects", "reckon_effect_transitions"},
		{"reckon_effect_transitions", "reckon_effects"},
	} {
		t.Run(order[0]+" then "+order[1], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := pgtest.NewEmptyDB(t)
			var logs syncBuffer
			migrator := newMigrator(t, pool, &db.MigratorConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			db.SetMigrations(migrator, all[:before])
			_, err = migrator.Up(ctx)
			require.NoError(t, err)
			db.SetMigrations(migrator, all)

			writer, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = writer.Rollback(ctx) }()
			_, err = writer.Exec(ctx, `LOCK TABLE `+order[0]+` IN ROW EXCLUSIVE MODE`)
			require.NoError(t, err)

			migrated := make(chan error, 1)
			go func() {
				_, err := migrator.Up(ctx)
				migrated <- err
			}()
			require.Eventually(t, func() bool { // the migration waits for the writer's table
				var waiting bool
				require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted
					AND relation = $1::regclass)`, order[0]).Scan(&waiting))
				return waiting
			}, 5*time.Second, time.Millisecond)
			start := time.Now()
			_, err = writer.Exec(ctx, `LOCK TABLE `+order[1]+` IN ROW EXCLUSIVE MODE`)
			require.NoError(t, err, "the writer is never the deadlock victim")
			require.Less(t, time.Since(start), time.Second)
			time.Sleep(1200 * time.Millisecond) // past deadlock_timeout, holding both
			require.NoError(t, writer.Commit(ctx))
			require.NoError(t, <-migrated)
			require.NotContains(t, logs.String(), "40P01")
			if order[0] == "reckon_effect_transitions" {
				require.Contains(t, logs.String(), "version=27")
				require.Contains(t, logs.String(), "SQLSTATE 55P03")
			}
			require.Contains(t, recordedVersions(t, pool), 27)
		})
	}
}

// TestDispatchEventTriggerMoved: 0032 creates the trigger 0027 used to create; on a database that
// got it from 0027 before the move, 0032 leaves the one it has. Down removes it.
func TestDispatchEventTriggerMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	migrator := newMigrator(t, pool, &db.MigratorConfig{Logger: slog.New(slog.DiscardHandler)})
	triggers := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger
			WHERE tgname = 'reckon_dispatch_event' AND tgrelid = 'river_job'::regclass`).Scan(&n))
		return n
	}
	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, triggers())

	// A database migrated before the move: the trigger is there, 0032 is not recorded.
	_, err = pool.Exec(ctx, `DELETE FROM reckon_schema_migrations WHERE version = 32`)
	require.NoError(t, err)
	result, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, []int{32}, result.Reckon)
	require.Equal(t, 1, triggers())

	// Down to before 0032 (the migrations after it first) removes it.
	_, err = migrator.Down(ctx, &db.DownOpts{Steps: len(recordedVersions(t, pool)) - 31})
	require.NoError(t, err)
	require.Equal(t, 0, triggers())
}
