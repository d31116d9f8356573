package testkit

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// StartReactorChild starts a child reactor (see StartChild) with flag set to 1, on pool's database
// and the bank at bankURL, with env added to its environment. The child reads DATABASE_URL and
// BANK_URL; flag is the variable that the package's TestMain turns into a reactor run.
func StartReactorChild(tb testing.TB, flag string, pool *pgxpool.Pool, bankURL string, env ...string) *proctest.Process {
	tb.Helper()
	return StartChild(tb, append([]string{
		flag + "=1",
		"DATABASE_URL=" + pool.Config().ConnString(),
		"BANK_URL=" + bankURL,
	}, env...)...)
}

// EnvDuration is the duration in the environment variable name, or fallback when it is unset or
// no duration: a child reactor's timings come from its parent test this way.
func EnvDuration(name string, fallback time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return fallback
}

// MainOrChild is the TestMain of a package whose tests start child processes of their own test
// binary (StartChild): when the environment variable env is set, this process is such a child, and
// it runs child with env's value and exits with the code child returns; otherwise it runs the
// package's tests (pgtest.Main).
func MainOrChild(m *testing.M, env string, child func(mode string) int) {
	if mode := os.Getenv(env); mode != "" {
		os.Exit(child(mode))
	}
	pgtest.Main(m)
}
