// Package pgtest gives each test a freshly migrated Postgres database of its own.
//
// The first test that asks for a database in a test binary finds a server: RECKON_TEST_DATABASE_URL
// or TEST_DATABASE_URL when one is set (in that order), otherwise a Postgres container started
// with testcontainers-go (image RECKON_TEST_PG_IMAGE, default DefaultImage), otherwise — no Docker
// engine, or one that cannot pull the image — the local Postgres at LocalURL, with a warning on
// stderr. RECKON_REQUIRE_CONTAINER=1 forbids that fallback, and so does CreateDB's strict mode,
// which the public package reckontest uses: a user's tests never touch a Postgres they did not
// name. On that server a template database is migrated once (Reckon's and River's migrations) and
// every test gets a clone of it, which is dropped when the test ends. Cloning takes milliseconds,
// so tests that commit can still run in parallel. One binary has one server, whoever asks first.
//
// With RECKON_TEST_CITUS_URL naming a Citus coordinator, NewDB gives each test a Citus cell of its
// own there instead (CitusURLVariable).
//
// Without a server a database test fails with the reason: it must never pass without a database.
// Outside CI (CI=true), RECKON_TEST_SKIP_DB=1 skips those tests instead, and Main reports how many.
//
// A test that must restart Postgres (stop it, start it again: its port may change) gets a container
// of its own with NewRestartable, whatever TEST_DATABASE_URL says; without a container engine it is
// skipped, and in CI (CI=true) it fails.
//
// A package that uses pgtest calls Main from its TestMain, so that the container is stopped:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/postgres"
)

// DefaultImage is the container image used when RECKON_TEST_PG_IMAGE is not set.
const DefaultImage = "postgres:15-alpine"

// LocalURL is the local Postgres, used when no URL is set and no container starts.
const LocalURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// URLVariables are the environment variables that name a server, the first one set winning.
var URLVariables = []string{"RECKON_TEST_DATABASE_URL", "TEST_DATABASE_URL"}

// Mode says where the databases come from.
type Mode string

const (
	// ModeURL: the server of RECKON_TEST_DATABASE_URL or TEST_DATABASE_URL.
	ModeURL Mode = "url"
	// ModeContainer: a Postgres container this test binary started.
	ModeContainer Mode = "container"
	// ModeLocal: the local Postgres at LocalURL, because no container could be started.
	ModeLocal Mode = "local"
)

// lockKeyTemplate is the advisory lock key held while a template database is built.
const lockKeyTemplate int32 = 2

var (
	// The server of a URL or a container, found once per binary; the local fallback, tried once
	// when there is neither and a caller allows it. defaultErr is why there is no server.
	primaryOnce   sync.Once
	localOnce     sync.Once
	defaultServer *server
	localServer   *server
	defaultErr    error
	localErr      error

	skipped atomic.Int64 // database tests skipped for want of a server
)

// Main runs the tests of a package and then stops the container it started, if any. It reports
// on stderr how many database tests were skipped (RECKON_TEST_SKIP_DB=1).
func Main(m *testing.M) { MainAs(m, "pgtest") }

// MainAs is Main for another package's TestMain, prefix starting its report.
func MainAs(m *testing.M, prefix string) {
	code := m.Run()
	if defaultServer != nil {
		defaultServer.close()
	}
	if n := skipped.Load(); n > 0 {
		if localErr != nil {
			defaultErr = localErr
		}
		fmt.Fprintf(os.Stderr, "%s: %d DATABASE TESTS SKIPPED (RECKON_TEST_SKIP_DB=1): %v\n", prefix, n, defaultErr)
	}
	os.Exit(code)
}

// NewDB returns a pool on a new database cloned from the migrated template. When the test ends, the
// database is scanned for ghosts — history or events about what never existed (RequireNoGhosts;
// AllowGhosts opts out) — then the pool is closed and the database dropped. Its connection string
// (pool.Config().ConnString()) serves subprocesses too.
func NewDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	if coordinator := os.Getenv(CitusURLVariable); coordinator != "" {
		return newCellDB(tb, coordinator)
	}
	return mustServer(tb).newDB(tb, true)
}

// NewEmptyDB is NewDB without the migrations: an empty database, for tests of migrating itself.
func NewEmptyDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return mustServer(tb).newDB(tb, false)
}

func mustServer(tb testing.TB) *server {
	tb.Helper()
	srv, err := defaultSrv()
	if err != nil {
		NoDatabase(tb, "pgtest", err)
	}
	return srv
}

// NoDatabase ends a database test that has no server, err saying why: it fails, unless
// RECKON_TEST_SKIP_DB=1 asks to skip it (never in CI), which Main counts. prefix starts the
// message.
func NoDatabase(tb testing.TB, prefix string, err error) {
	tb.Helper()
	if skipWithoutDatabase(os.Getenv) {
		skipped.Add(1)
		tb.Skipf("%s: no test database, skipped (RECKON_TEST_SKIP_DB=1): %v", prefix, err)
	}
	tb.Fatalf("%s: no test database: %v (outside CI, RECKON_TEST_SKIP_DB=1 skips the database tests)", prefix, err)
}

// skipWithoutDatabase reports whether a database test without a server is skipped rather than
// failed: only when RECKON_TEST_SKIP_DB=1 asks for it, and never in CI.
func skipWithoutDatabase(getenv func(string) string) bool {
	return getenv("CI") != "true" && getenv("RECKON_TEST_SKIP_DB") == "1"
}

// Info describes the server the databases of this test binary come from.
type Info struct {
	Mode Mode
	// AdminURL connects to the server's maintenance database.
	AdminURL string
	// Container is the running container in ModeContainer, nil otherwise.
	Container *tcpostgres.PostgresContainer
}

// Server finds (once per test binary) the server databases are cloned on, and describes it.
func Server() (Info, error) {
	srv, err := defaultSrv()
	if err != nil {
		return Info{}, err
	}
	return srv.Info, nil
}

// defaultSrv is the binary's server: a URL's or a container, else the local Postgres (see
// finder.find).
func defaultSrv() (*server, error) {
	srv, err := primarySrv()
	if err == nil || defaultFinder.url() != "" {
		return srv, err
	}
	localOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		localServer, localErr = defaultFinder.fallback(ctx, err)
	})
	return localServer, localErr
}

// primarySrv is the binary's server when a URL names it or a container starts; it never falls
// back to the local Postgres.
func primarySrv() (*server, error) {
	primaryOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		defaultServer, defaultErr = defaultFinder.primary(ctx)
	})
	return defaultServer, defaultErr
}

var defaultFinder = finder{getenv: os.Getenv, startContainer: startContainer, reachable: reachable, warn: os.Stderr}

// finder decides where the databases of a test binary come from.
type finder struct {
	getenv         func(string) string
	startContainer func(ctx context.Context, image string) (*server, error)
	reachable      func(ctx context.Context, conn string) error
	warn           io.Writer // told when the local Postgres stands in for a container
}

// find returns the server of a URL (URLVariables); else a new container; else, unless
// RECKON_REQUIRE_CONTAINER=1, the local Postgres, saying so loudly.
func (f finder) find(ctx context.Context) (*server, error) {
	srv, err := f.primary(ctx)
	if err == nil || f.url() != "" {
		return srv, err
	}
	return f.fallback(ctx, err)
}

// url returns the first URL of URLVariables that is set, "" if none is.
func (f finder) url() string {
	for _, name := range URLVariables {
		if conn := f.getenv(name); conn != "" {
			return conn
		}
	}
	return ""
}

// primary returns the server of a URL (URLVariables), else a new container.
func (f finder) primary(ctx context.Context) (*server, error) {
	if conn := f.url(); conn != "" {
		return newURLServer(conn)
	}
	image := f.getenv("RECKON_TEST_PG_IMAGE")
	if image == "" {
		image = DefaultImage
	}
	srv, err := f.startContainer(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("no URL in %s, and %w", strings.Join(URLVariables, " or "), err)
	}
	return srv, nil
}

// fallback returns the local Postgres, saying so loudly, when no container started (containerErr
// says why), unless RECKON_REQUIRE_CONTAINER=1.
func (f finder) fallback(ctx context.Context, containerErr error) (*server, error) {
	if f.getenv("RECKON_REQUIRE_CONTAINER") == "1" {
		return nil, fmt.Errorf("RECKON_REQUIRE_CONTAINER=1: %w", containerErr)
	}
	if err := f.reachable(ctx, LocalURL); err != nil {
		return nil, fmt.Errorf("%w; and no local Postgres at %s (%v): set TEST_DATABASE_URL, or make Docker or Postgres available",
			containerErr, LocalURL, err)
	}
	fmt.Fprintf(f.warn, "pgtest: NO POSTGRES CONTAINER: %v\npgtest: FALLING BACK to the local Postgres at %s\n", containerErr, LocalURL)
	return &server{Info: Info{Mode: ModeLocal, AdminURL: LocalURL}}, nil
}

// reachable connects to conn once.
func reachable(ctx context.Context, conn string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// server is one Postgres server on which test databases are cloned from a template.
type server struct {
	Info

	templateOnce sync.Once
	template     string
	templateErr  error
}

func newURLServer(conn string) (*server, error) {
	if _, err := pgx.ParseConfig(conn); err != nil {
		return nil, fmt.Errorf("the test database URL: %w", err)
	}
	return &server{Info: Info{Mode: ModeURL, AdminURL: conn}}, nil
}

func startContainer(ctx context.Context, image string) (*server, error) {
	ctr, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithDatabase("reckon"),
		tcpostgres.BasicWaitStrategies(),
		// Durability is not under test here; speed is welcome.
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=300"),
	)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("no Postgres container (image %s): %w", image, err)
	}
	conn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("postgres container connection string: %w", err)
	}
	return &server{Info: Info{Mode: ModeContainer, AdminURL: conn, Container: ctr}}, nil
}

func (s *server) close() {
	if s.Container != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Container.Terminate(ctx)
	}
}

// newDB is createDB for a test: it fails the test on error and drops the database at its end.
func (s *server) newDB(tb testing.TB, migrated bool) *pgxpool.Pool {
	tb.Helper()
	pool, drop, err := s.createDB(migrated)
	return forTest(tb, pool, drop, err, migrated)
}

// forTest hands a test the pool of a new database (or Citus cell) that create returned: it fails
// the test on err, and when the test ends scans a migrated database for ghosts, closes the pool
// and drops the database.
func forTest(tb testing.TB, pool *pgxpool.Pool, drop func() error, err error, migrated bool) *pgxpool.Pool {
	tb.Helper()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if migrated {
			checkGhostsAtEnd(tb, pool.Config().ConnString())
		}
		pool.Close()
		if err := drop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return pool
}

// NewExampleDB is NewDB for runnable examples, which have no *testing.T: it panics when there is
// no database, and the returned function closes the pool and drops the database.
func NewExampleDB() (*pgxpool.Pool, func()) {
	srv, err := defaultSrv()
	if err != nil {
		panic(fmt.Sprintf("pgtest: examples need a database (set TEST_DATABASE_URL or start Docker): %v", err))
	}
	pool, drop, err := srv.createDB(true)
	if err != nil {
		panic(fmt.Sprintf("pgtest: %v", err))
	}
	return pool, func() {
		pool.Close()
		_ = drop()
	}
}

// CreateDB creates a database cloned from the migrated template on the binary's server and
// returns a pool on it and a function that closes the pool and drops the database. strict never
// falls back to the local Postgres: the server is a URL's (URLVariables) or a container. An error
// says why there is no database.
func CreateDB(strict bool) (*pgxpool.Pool, func() error, error) {
	find := defaultSrv
	if strict {
		find = primarySrv
	}
	srv, err := find()
	if err != nil {
		return nil, nil, err
	}
	pool, drop, err := srv.createDB(true)
	if err != nil {
		return nil, nil, err
	}
	return pool, func() error {
		pool.Close()
		return drop()
	}, nil
}

// createDB creates a database, cloned from the migrated template when migrated is true and empty
// otherwise, and returns a pool on it and a function that drops it (after the pool is closed).
func (s *server) createDB(migrated bool) (*pgxpool.Pool, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	template := "template0"
	if migrated {
		s.templateOnce.Do(func() { s.template, s.templateErr = s.ensureTemplate(ctx) })
		if s.templateErr != nil {
			return nil, nil, fmt.Errorf("template database: %w", s.templateErr)
		}
		template = s.template
	}

	name := "reckon_test_" + randomHex(8)
	admin, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", s.Mode, err)
	}
	defer admin.Close(ctx)
	// UTF8 as Reckon requires (docs/operations.md), whatever the server's default: the container
	// image's is SQL_ASCII, where jsonb refuses every \u escape beyond ASCII.
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+quote(name)+" ENCODING 'UTF8' TEMPLATE "+quote(template)); err != nil {
		return nil, nil, fmt.Errorf("clone template: %w", err)
	}
	drop := func() error { return s.dropDatabase(name) }

	config, err := pgxpool.ParseConfig(postgres.WithDatabase(s.AdminURL, name))
	if err == nil {
		config.MaxConns = 10
		var pool *pgxpool.Pool
		if pool, err = pgxpool.NewWithConfig(ctx, config); err == nil {
			return pool, drop, nil
		}
	}
	_ = drop()
	return nil, nil, fmt.Errorf("pool on %s: %w", name, err)
}

func (s *server) dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(name)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	return nil
}

// ensureTemplate returns the name of a template database migrated to the current schema, building
// it if the server has none. The name carries a hash of every migration, so a changed schema gets a
// new template. Test binaries building at once on one server wait for each other on an advisory
// lock; a half-built template left by a killed process is dropped and built again.
func (s *server) ensureTemplate(ctx context.Context) (string, error) {
	hash, err := schemaHash()
	if err != nil {
		return "", err
	}
	name := "reckon_tpl_" + hash
	building := name + "_building"

	admin, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", s.Mode, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, db.AdvisoryLockNamespace, lockKeyTemplate); err != nil {
		return "", err
	}
	// Closing admin frees the lock.

	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	for _, stmt := range []string{
		"DROP DATABASE IF EXISTS " + quote(building) + " WITH (FORCE)",
		"CREATE DATABASE " + quote(building) + " ENCODING 'UTF8' TEMPLATE template0",
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			return "", err
		}
	}
	pool, err := pgxpool.New(ctx, postgres.WithDatabase(s.AdminURL, building))
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+quote(building)+" RENAME TO "+quote(name)); err != nil {
		return "", err
	}
	return name, nil
}

// schemaHash identifies the schema the migrations produce: Reckon's migrations and River's.
func schemaHash() (string, error) {
	migrations, err := db.Migrations()
	if err != nil {
		return "", err
	}
	riverMigrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migrations {
		fmt.Fprintf(h, "%d\x00%s\x00%s\x00", m.Version, m.Up, m.Down)
	}
	for _, m := range riverMigrator.AllVersions() {
		fmt.Fprintf(h, "river %d\x00%s\x00", m.Version, m.SQLUp)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
