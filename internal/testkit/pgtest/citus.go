package pgtest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/db"
)

// CitusURLVariable names a Citus coordinator. When it is set, NewDB gives each test a Citus cell
// of its own there (docs/deploy.md, "Past one Postgres: Citus cells") instead of a database: a
// schema migrated with db.MigratorConfig.Citus, whose pool — and connection string, for
// subprocesses — has the cell on its search path. `make test-citus` runs the engine's integration
// tests so (scripts/test-citus).
const CitusURLVariable = "RECKON_TEST_CITUS_URL"

// newCell makes a cell on the coordinator and returns a pool on it and a function that drops it
// (after the pool is closed).
func newCell(coordinator string) (*pgxpool.Pool, func() error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "pgtest_" + randomHex(6)
	sep := "?"
	if strings.Contains(coordinator, "?") {
		sep = "&"
	}
	config, err := pgxpool.ParseConfig(coordinator + sep + "search_path=" + url.QueryEscape(name+","+db.RiverSchema(name)))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", CitusURLVariable, err)
	}
	config.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, nil, fmt.Errorf("pool on the Citus coordinator: %w", err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, coordinator)
		if err != nil {
			return fmt.Errorf("drop the cell %s: %w", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+quote(name)+", "+quote(db.RiverSchema(name))+" CASCADE"); err != nil {
			return fmt.Errorf("drop the cell %s: %w", name, err)
		}
		return nil
	}
	migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Schema: name, Citus: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		_, err = migrator.Up(ctx)
	}
	if err != nil {
		pool.Close()
		_ = drop()
		return nil, nil, fmt.Errorf("make the cell %s: %w", name, err)
	}
	return pool, drop, nil
}

// newCellDB is NewDB on a Citus cell.
func newCellDB(tb testing.TB, coordinator string) *pgxpool.Pool {
	tb.Helper()
	pool, drop, err := newCell(coordinator)
	return forTest(tb, pool, drop, err, true)
}
