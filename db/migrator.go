package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/reckonhq/reckon/internal/txn"
)

// Migrator applies Reckon's migrations and River's to one database. Every operation holds the
// advisory lock (AdvisoryLockNamespace, LockKeyMigrate) on one dedicated connection, so migrators
// started at once in several processes run one after another and each migration is applied once.
type Migrator struct {
	pool       *pgxpool.Pool
	logger     *slog.Logger
	migrations []Migration
	river      *rivermigrate.Migrator[pgx.Tx]
	retry      txn.Policy
	// lockTimeout is the lock_timeout setting of the migrations' statements ("0": none).
	lockTimeout string
	// schema is MigratorConfig.Schema.
	schema string
	// citus is MigratorConfig.Citus.
	citus bool
}

// MigratorConfig configures a Migrator. The zero value is ready to use.
type MigratorConfig struct {
	// Logger receives, at debug level, one line per migration Up applies (Migrate sums them up in
	// one info line), at info level one per migration Down rolls back and one when another
	// migrator holds the lock and this one waits, and River's migrator's warnings (its info lines,
	// one per River version, are left out). Default: slog.Default().
	Logger *slog.Logger
	// LockTimeout bounds how long a statement of a migration (Reckon's or River's) waits for a
	// lock: Postgres's lock_timeout, set for each migration's transaction. A migration that waits
	// longer — the running code holds the table — is rolled back, which frees the writers queued
	// behind it, and run again whole after a pause (see Up). A statement of a NoTransaction
	// migration waits as long as this too and is run again alone, except CREATE INDEX
	// CONCURRENTLY, which blocks no writer and waits without a bound. Default: 2 s. Negative:
	// no bound (the session's lock_timeout).
	LockTimeout time.Duration
	// MaxRetryWait bounds how long Up keeps running again a migration that loses to the running
	// code (a lock timeout, a deadlock, a serialization failure): past it, the migration's last
	// error is returned (and the migration stays pending). The context bounds it too. Default:
	// 10 minutes.
	MaxRetryWait time.Duration
	// Schema is the schema the pool's connections use (ConfigureSchema): Up creates it if it does
	// not exist, and every operation first checks that it is the connections' current schema, so a
	// pool opened without ConfigureSchema is refused rather than migrated into public. The
	// migration lock is per database: migrators of different schemas run one after another.
	// Default: "" (the connections' current schema, normally public, is used and not checked).
	Schema string
	// Citus makes Schema a Citus cell (see RiverSchema and docs/deploy.md): on a Citus
	// coordinator, Up creates River's tables in RiverSchema(Schema), Reckon's in Schema, and then
	// distributes Schema (citus_schema_distribute). A schema Citus already distributed is
	// migrated as a cell without it. Requires Schema.
	Citus bool
}

// Defaults of MigratorConfig.
const (
	defaultLockTimeout  = 2 * time.Second
	defaultMaxRetryWait = 10 * time.Minute
	// maxRetryPause caps the pause between two runs of a migration that lost to the running code.
	maxRetryPause = 5 * time.Second
)

// NewMigrator returns a Migrator for the database behind pool. A nil config uses the defaults.
func NewMigrator(pool *pgxpool.Pool, config *MigratorConfig) (*Migrator, error) {
	if config == nil {
		config = &MigratorConfig{}
	}
	if config.Schema != "" {
		if err := ValidateSchema(config.Schema); err != nil {
			return nil, fmt.Errorf("migrator: %w", err)
		}
	} else if config.Citus {
		return nil, errors.New("migrator: a Citus cell needs a schema of its own (Schema)")
	}
	logger := config.Logger
	if logger == nil {
		logger = slog.Default()
	}
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	riverLogger := slog.New(minLevelHandler{Handler: logger.Handler(), min: slog.LevelWarn})
	riverMigrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: riverLogger})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	lockTimeout := config.LockTimeout
	if lockTimeout == 0 {
		lockTimeout = defaultLockTimeout
	}
	lockSetting := "0"
	if lockTimeout > 0 {
		lockSetting = fmt.Sprintf("%dms", max(lockTimeout.Milliseconds(), 1))
	}
	maxWait := config.MaxRetryWait
	if maxWait <= 0 {
		maxWait = defaultMaxRetryWait
	}
	retry := txn.Policy{
		Attempts: -1,
		MaxWait:  maxWait,
		// 250 ms, 500 ms, 1 s, 2 s, 4 s, 5 s, 5 s…: the writers that queued behind the migration's
		// lock drain meanwhile.
		Pause: func(attempt int) time.Duration {
			return min(250*time.Millisecond<<min(attempt-1, 5), maxRetryPause)
		},
		Message: "migration lost a lock to the running code; rolled back, running it again",
	}
	return &Migrator{pool: pool, logger: logger, migrations: migrations, river: riverMigrator,
		retry: retry, lockTimeout: lockSetting, schema: config.Schema, citus: config.Citus}, nil
}

// Migrate applies every pending migration, River's first and then Reckon's: what `server migrate
// up` does, for programs that embed Reckon. It is safe to call from many processes at once. When
// it applied any, it logs one info line saying which.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	migrator, err := NewMigrator(pool, &MigratorConfig{Logger: logger})
	if err != nil {
		return err
	}
	start := time.Now()
	result, err := migrator.Up(ctx)
	if err == nil && (len(result.River) > 0 || len(result.Reckon) > 0) {
		migrator.logger.InfoContext(ctx, "applied migrations", slog.Any("river_versions", result.River),
			slog.Any("reckon_versions", result.Reckon), slog.Duration("duration", time.Since(start)))
	}
	return err
}

// minLevelHandler drops the records below min: River's migrator logs every version it applies at
// info level, which a first run would print a screenful of.
type minLevelHandler struct {
	slog.Handler
	min slog.Level
}

func (h minLevelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{Handler: h.Handler.WithGroup(name), min: h.min}
}

// Result lists what one Up or Down applied.
type Result struct {
	// River holds the River schema versions applied, in the order applied.
	River []int
	// Reckon holds Reckon's migration versions applied, in the order applied.
	Reckon []int
}

const createVersionTable = `
CREATE TABLE IF NOT EXISTS reckon_schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Up applies every pending migration: River's, then Reckon's, each in its own transaction with
// the row that records it. A failing migration is rolled back and stops the run; the ones before
// it stay applied. A NoTransaction migration runs statement by statement and is recorded after
// its last one: a failure leaves the statements before it done and the migration pending (see
// Migration).
//
// Up runs online, while servers and reactors of the previous version keep working: each
// statement waits at most MigratorConfig.LockTimeout for a lock, and a migration that Postgres
// aborts because of the running code — its lock wait timed out (55P03), it was chosen as a
// deadlock victim (40P01), a serialization failure (40001) — is rolled back and run again whole
// (a NoTransaction one: that statement), after a growing pause, logged at warning level each
// time, until MigratorConfig.MaxRetryWait or the context ends. Writers thus wait for a migration
// at most about LockTimeout at a time, and a busy database delays an upgrade instead of failing it.
func (m *Migrator) Up(ctx context.Context) (*Result, error) {
	result := &Result{}
	if m.citus { // before the schema is made
		if installed, err := citusInstalled(ctx, m.pool); err != nil {
			return result, err
		} else if !installed {
			return result, errNoCitus
		}
	}
	err := m.withLock(ctx, true, func(conn *pgxpool.Conn) error {
		citus, err := m.citusStatus(ctx, conn)
		if err != nil {
			return err
		}
		if citus.cell {
			defer citusDone(ctx, conn)
			if err := m.citusPrepare(ctx, conn); err != nil {
				return err
			}
		}
		river, err := m.migrateRiver(ctx, conn, citus.cell, rivermigrate.DirectionUp)
		result.River = river
		if err != nil {
			return fmt.Errorf("river migrations up: %w", err)
		}
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for _, migration := range m.migrations {
			if _, ok := applied[migration.Version]; ok {
				continue
			}
			start := time.Now()
			err := m.run(ctx, conn, migration, migration.Up,
				`INSERT INTO reckon_schema_migrations (version, name) VALUES ($1, $2)`, migration.Version, migration.Name)
			if err != nil {
				return fmt.Errorf("migration %04d_%s up: %w", migration.Version, migration.Name, err)
			}
			m.logger.DebugContext(ctx, "applied migration", slog.Int("version", migration.Version),
				slog.String("name", migration.Name), slog.Duration("duration", time.Since(start)))
			result.Reckon = append(result.Reckon, migration.Version)
		}
		if citus.cell {
			return m.citusFinish(ctx, conn, citus)
		}
		return nil
	})
	return result, err
}

// DownOpts says how far Down goes.
type DownOpts struct {
	// Steps is how many of Reckon's applied migrations to roll back, newest first. Default: 1.
	Steps int
	// All rolls back every Reckon migration and then River's schema as well, leaving the database
	// as it was before the first Up. Steps is ignored.
	All bool
}

// Down rolls back applied migrations, newest first, each in its own transaction (a NoTransaction
// migration statement by statement, as Up runs it). It destroys the data of the tables it drops.
func (m *Migrator) Down(ctx context.Context, opts *DownOpts) (*Result, error) {
	if opts == nil {
		opts = &DownOpts{}
	}
	steps := opts.Steps
	if steps == 0 {
		steps = 1
	}
	if steps < 0 {
		return nil, fmt.Errorf("migrate down: steps must be positive, got %d", steps)
	}
	result := &Result{}
	err := m.withLock(ctx, false, func(conn *pgxpool.Conn) error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for i := len(m.migrations) - 1; i >= 0 && (opts.All || len(result.Reckon) < steps); i-- {
			migration := m.migrations[i]
			if _, ok := applied[migration.Version]; !ok {
				continue
			}
			err := m.run(ctx, conn, migration, migration.Down,
				`DELETE FROM reckon_schema_migrations WHERE version = $1`, migration.Version)
			if err != nil {
				return fmt.Errorf("migration %04d_%s down: %w", migration.Version, migration.Name, err)
			}
			m.logger.InfoContext(ctx, "rolled back migration", slog.Int("version", migration.Version),
				slog.String("name", migration.Name))
			result.Reckon = append(result.Reckon, migration.Version)
		}
		if !opts.All {
			return nil
		}
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS reckon_schema_migrations`); err != nil {
			return err
		}
		citus, err := m.citusStatus(ctx, conn)
		if err != nil {
			return err
		}
		river, err := m.migrateRiver(ctx, conn, citus.cell, rivermigrate.DirectionDown)
		result.River = river
		if err != nil {
			return fmt.Errorf("river migrations down: %w", err)
		}
		return nil
	})
	return result, err
}

// run runs sql, one direction of migration, on conn together with record, the statement that
// records it: in one transaction, or for a NoTransaction migration one statement at a time and
// record last, so that a failure leaves the migration's recorded state as it was. What loses to
// the running code is run again as Up says.
func (m *Migrator) run(ctx context.Context, conn *pgxpool.Conn, migration Migration, sql, record string, args ...any) error {
	attrs := []slog.Attr{slog.Int("version", migration.Version), slog.String("name", migration.Name)}
	if !migration.NoTransaction {
		return txn.Retry(ctx, m.logger, m.retry, func() error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, m.lockTimeout); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, sql); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, record, args...)
				return err
			})
		}, attrs...)
	}
	statements, err := splitStatements(sql)
	if err != nil {
		return err
	}
	// The session's lock_timeout, put back before the connection returns to the pool.
	defer func() {
		resetCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(resetCtx, `RESET lock_timeout`)
	}()
	for i := 0; i < len(statements); i++ {
		// A statement that lost to the running code runs again alone; a CREATE INDEX CONCURRENTLY
		// that did leaves an INVALID index behind, so it runs again with the DROP INDEX
		// CONCURRENTLY IF EXISTS before it (Migration's rule), which clears that index.
		from := i
		concurrently := strings.Contains(strings.ToUpper(statements[i]), "CONCURRENTLY")
		if concurrently && i > 0 && strings.HasPrefix(strings.ToUpper(strings.TrimSpace(statements[i-1])), "DROP INDEX CONCURRENTLY") {
			from = i - 1
		}
		// CONCURRENTLY blocks no writer, but waits for every older transaction: no bound.
		timeout := m.lockTimeout
		if concurrently {
			timeout = "0"
		}
		err := txn.Retry(ctx, m.logger, m.retry, func() error {
			for j := from; j <= i; j++ {
				// One statement per Exec: a multi-statement string is one implicit transaction, which
				// CREATE INDEX CONCURRENTLY refuses.
				if _, err := conn.Exec(ctx, `SELECT set_config('lock_timeout', $1, false)`, timeout); err != nil {
					return err
				}
				if _, err := conn.Exec(ctx, statements[j]); err != nil {
					return err
				}
			}
			return nil
		}, append(attrs, slog.Int("statement", i+1))...)
		if err != nil {
			return fmt.Errorf("statement %d of %d, outside a transaction (the ones before it stay done): %w", i+1, len(statements), err)
		}
	}
	_, err = conn.Exec(ctx, record, args...)
	return err
}

// migrateRiver applies River's migrations in direction until none is left, one version per
// transaction: some of River's versions cannot share a transaction with the one before (006 adds
// an enum value that later statements use). In a Citus cell, River's tables are in RiverSchema.
func (m *Migrator) migrateRiver(ctx context.Context, conn *pgxpool.Conn, cell bool, direction rivermigrate.Direction) ([]int, error) {
	var versions []int
	for {
		var applied []rivermigrate.MigrateVersion
		err := txn.Retry(ctx, m.logger, m.retry, func() error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, m.lockTimeout); err != nil {
					return err
				}
				if cell {
					if _, err := tx.Exec(ctx, `SELECT set_config('search_path', $1, true)`, pgx.Identifier{RiverSchema(m.schema)}.Sanitize()); err != nil {
						return err
					}
				}
				opts := &rivermigrate.MigrateOpts{MaxSteps: 1}
				//lint:ignore SA1019 one version per transaction (MaxSteps 1) is what the deprecation asks for; Migrate would not run on the connection that holds our lock
				res, err := m.river.MigrateTx(ctx, tx, direction, opts)
				if err != nil {
					return err
				}
				applied = res.Versions
				return nil
			})
		}, slog.String("river", "one version"))
		if err != nil {
			return versions, err
		}
		if len(applied) == 0 {
			return versions, nil
		}
		for _, v := range applied {
			versions = append(versions, v.Version)
		}
	}
}

// Status is the migration state of a database as this binary sees it.
type Status struct {
	// Applied are Reckon's migrations recorded in the database, oldest first, with when.
	Applied []AppliedMigration
	// Pending are Reckon's migrations this binary has and the database lacks.
	Pending []Migration
	// Unknown are versions recorded in the database that this binary does not have (a newer
	// binary migrated it).
	Unknown []int
	// RiverApplied and RiverPending count River's schema versions.
	RiverApplied, RiverPending int
}

// AppliedMigration is one row of reckon_schema_migrations.
type AppliedMigration struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

// Current reports whether nothing is pending, for River or Reckon.
func (s *Status) Current() bool { return len(s.Pending) == 0 && s.RiverPending == 0 }

// Status reads the migration state without changing anything or taking the lock.
func (m *Migrator) Status(ctx context.Context) (*Status, error) {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	defer conn.Release()
	if _, err := m.checkSchema(ctx, conn, false); err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}
	status := &Status{}
	known := map[int]bool{}
	for _, migration := range m.migrations {
		known[migration.Version] = true
		if row, ok := applied[migration.Version]; ok {
			status.Applied = append(status.Applied, row)
		} else {
			status.Pending = append(status.Pending, migration)
		}
	}
	for version := range applied {
		if !known[version] {
			status.Unknown = append(status.Unknown, version)
		}
	}
	slices.Sort(status.Unknown)
	riverExisting, err := m.river.ExistingVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("river migration status: %w", err)
	}
	status.RiverApplied = len(riverExisting)
	status.RiverPending = len(m.river.AllVersions()) - len(riverExisting)
	return status, nil
}

// lockPollInterval is how often a migrator waiting for the migration lock tries to take it.
const lockPollInterval = 200 * time.Millisecond

// withLock runs fn on a dedicated connection holding the migration advisory lock, once the schema
// is checked (and with create, created: checkSchema). The lock is released before the connection
// goes back to the pool; if releasing fails the connection is closed instead, which frees the lock.
func (m *Migrator) withLock(ctx context.Context, create bool, fn func(conn *pgxpool.Conn) error) (err error) {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: acquire connection: %w", err)
	}
	if err := m.lock(ctx, conn); err != nil {
		conn.Release()
		return fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	defer func() {
		// Unlock with a context of its own: ctx may be what ended fn.
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, unlockErr := conn.Exec(unlockCtx, `SELECT pg_advisory_unlock($1, $2)`, AdvisoryLockNamespace, LockKeyMigrate); unlockErr != nil {
			_ = conn.Hijack().Close(unlockCtx)
			return
		}
		conn.Release()
	}()
	if exists, err := m.checkSchema(ctx, conn, create); err != nil {
		return err
	} else if !exists {
		return fmt.Errorf("migrate: schema %s does not exist (migrate up creates it)", m.schema)
	}
	if _, err := conn.Exec(ctx, createVersionTable); err != nil {
		return fmt.Errorf("migrate: create reckon_schema_migrations: %w", err)
	}
	return fn(conn)
}

// checkSchema, with MigratorConfig.Schema set, checks that it is conn's current schema, having
// created it first if create is set, and reports whether it exists. Without create, a schema that
// does not exist (search_path names it, and nothing else) is not an error: Status reports every
// migration pending, Down refuses.
func (m *Migrator) checkSchema(ctx context.Context, conn *pgxpool.Conn, create bool) (exists bool, err error) {
	if m.schema == "" {
		return true, nil
	}
	if create {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{m.schema}.Sanitize()); err != nil {
			return false, fmt.Errorf("migrate: create schema %s: %w", m.schema, err)
		}
	}
	var current *string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return false, fmt.Errorf("migrate: read the current schema: %w", err)
	}
	if current == nil && !create {
		return false, nil
	}
	if current == nil || *current != m.schema {
		got := "none"
		if current != nil {
			got = *current
		}
		return false, fmt.Errorf("migrate: schema %s: the connections' current schema is %s; open the pool with db.ConfigureSchema (search_path) for the same schema", m.schema, got)
	}
	return true, nil
}

// lock takes the migration advisory lock on conn, waiting while another migrator holds it.
//
// It polls pg_try_advisory_lock instead of blocking in pg_advisory_lock: a session blocked in
// pg_advisory_lock is running a statement, with a snapshot, and a CREATE INDEX CONCURRENTLY in the
// migrator that holds the lock waits for every older snapshot in the database to end. The two would
// wait for each other until Postgres's deadlock detector killed one of them. Between two tries a
// waiting migrator holds no snapshot.
func (m *Migrator) lock(ctx context.Context, conn *pgxpool.Conn) error {
	for waited := false; ; waited = true {
		var locked bool
		err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, AdvisoryLockNamespace, LockKeyMigrate).Scan(&locked)
		if err != nil || locked {
			return err
		}
		if !waited {
			m.logger.InfoContext(ctx, "waiting for another migrator to finish (it holds the migration lock)")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockPollInterval):
		}
	}
}

func appliedVersions(ctx context.Context, conn *pgxpool.Conn) (map[int]AppliedMigration, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('reckon_schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	applied := map[int]AppliedMigration{}
	if !exists {
		return applied, nil
	}
	rows, err := conn.Query(ctx, `SELECT version, name, applied_at FROM reckon_schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	rowsApplied, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AppliedMigration, error) {
		var a AppliedMigration
		err := row.Scan(&a.Version, &a.Name, &a.AppliedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	for _, a := range rowsApplied {
		applied[a.Version] = a
	}
	return applied, nil
}
