package reckontest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// NewDB returns a pool on a new database of its own for the test, migrated with Reckon's
// migrations (package db: Reckon's and River's tables, as `server migrate up` leaves them). The
// pool is closed and the database dropped when the test ends; its connection string
// (pool.Config().ConnString()) serves subprocesses too.
//
// The database is made on the server of RECKON_TEST_DATABASE_URL, else of TEST_DATABASE_URL,
// which must be allowed to create and drop databases; with neither set, in a Postgres container
// that the first call in the test binary starts with testcontainers-go (image
// RECKON_TEST_PG_IMAGE, default postgres:15-alpine) and every later call shares. Each database
// is a clone of a template migrated once per server, made in milliseconds, so tests that commit
// can run in parallel. Nothing else is tried: a test never touches a Postgres the environment
// does not name.
//
// With no database to be had the test fails, saying why. RECKON_TEST_SKIP_DB=1 skips it instead,
// except under CI=true (where a missing database must fail the build).
func NewDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, drop, err := pgtest.CreateDB(true)
	if err != nil {
		pgtest.NoDatabase(tb, "reckontest", err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("reckontest: %v", err)
		}
	})
	return pool
}

// Main runs the tests of a package and then stops the Postgres container NewDB started, if any;
// call it from TestMain:
//
//	func TestMain(m *testing.M) { reckontest.Main(m) }
//
// Without it testcontainers' reaper (Ryuk) removes the container once the test binary exits,
// where the reaper runs. Main also reports on stderr how many database tests were skipped
// (RECKON_TEST_SKIP_DB=1). It does not return.
func Main(m *testing.M) { pgtest.MainAs(m, "reckontest") }
