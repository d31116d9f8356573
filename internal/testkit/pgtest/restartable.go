package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/reckonhq/reckon/internal/postgres"
)

// Restartable is a Postgres container of one test's own, which the test may stop and start again
// (a Postgres restart, or an outage) without touching any other test's databases. It holds one
// migrated database. The container's host port may change across a restart: read URL again after
// Start, and open new pools on it.
type Restartable struct {
	tb        testing.TB
	container *tcpostgres.PostgresContainer
	database  string
	url       string
}

// NewRestartable starts a dedicated Postgres container (image RECKON_TEST_PG_IMAGE, default
// DefaultImage) with a migrated database, and terminates it when the test ends. It ignores
// TEST_DATABASE_URL: a shared server cannot be restarted by one test. Without a container engine
// the test is skipped, except in CI (CI=true), where it fails: there the restart is what is under
// test. Postgres keeps its defaults (fsync on): the restart must find what was committed.
func NewRestartable(tb testing.TB) *Restartable {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := os.Getenv("RECKON_TEST_PG_IMAGE")
	if image == "" {
		image = DefaultImage
	}
	ctr, err := tcpostgres.Run(ctx, image, tcpostgres.WithDatabase("reckon"), tcpostgres.BasicWaitStrategies())
	if ctr != nil {
		tb.Cleanup(func() { testcontainers.CleanupContainer(tb, ctr) })
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("pgtest: no restartable Postgres container (required in CI): %v", err)
		}
		tb.Skipf("pgtest: no restartable Postgres container, skipped (CI=true fails instead): %v", err)
	}
	r := &Restartable{tb: tb, container: ctr}
	srv := &server{Info: Info{Mode: ModeContainer, AdminURL: r.adminURL(ctx), Container: ctr}}
	pool, _, err := srv.createDB(true) // dropped with the container
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	r.database = pool.Config().ConnConfig.Database
	pool.Close()
	r.refreshURL(ctx)
	return r
}

// URL is the connection string of the migrated database, as the container is mapped now.
func (r *Restartable) URL() string { return r.url }

// Stop stops the container: Postgres shuts down (a fast shutdown, killed after 10s) and every
// connection to it ends.
func (r *Restartable) Stop() {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	timeout := 10 * time.Second
	if err := r.container.Stop(ctx, &timeout); err != nil {
		r.tb.Fatalf("pgtest: stop the container: %v", err)
	}
}

// Start starts the stopped container again and returns once the database accepts connections,
// with URL updated to the container's new port mapping.
func (r *Restartable) Start() {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.container.Start(ctx); err != nil {
		r.tb.Fatalf("pgtest: start the container again: %v", err)
	}
	r.refreshURL(ctx)
	// The wait strategy reads the container's whole log, the first run's lines included, so it may
	// pass before this run is ready: connect until it answers.
	var err error
	for ctx.Err() == nil {
		if err = reachable(ctx, r.url); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.tb.Fatalf("pgtest: the restarted container does not answer: %v", err)
}

// refreshURL reads the container's connection string again (its port may have changed).
func (r *Restartable) refreshURL(ctx context.Context) {
	r.tb.Helper()
	r.url = postgres.WithDatabase(r.adminURL(ctx), r.database)
}

func (r *Restartable) adminURL(ctx context.Context) string {
	r.tb.Helper()
	conn, err := r.container.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		r.tb.Fatalf("pgtest: container connection string: %v", err)
	}
	return conn
}
