// Package postgres holds what Reckon's packages share to talk to Postgres beyond transactions
// (internal/txn): opening a pool (OpenPool), naming another database on the same server
// (WithDatabase), reading a query's "no rows" (NoRows), and taking and freeing advisory locks
// (AdvisoryLock).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/db"
)

// OpenPool connects to databaseURL and checks that the database answers. maxConns > 0 sets the
// pool's size (pgx's default is max(4, CPUs), too few for a reactor). A schema other than "" puts
// the pool's connections in that schema (db.ConfigureSchema); an invalid name is an error.
func OpenPool(ctx context.Context, databaseURL string, maxConns int, schema string) (*pgxpool.Pool, error) {
	config, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		config.MaxConns = int32(maxConns)
	}
	if schema != "" {
		if err := db.ConfigureSchema(config, schema); err != nil {
			return nil, err
		}
	}
	db.ConfigurePool(config)
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s on %s: %w", config.ConnConfig.Database, config.ConnConfig.Host, err)
	}
	return pool, nil
}

// WithDatabase returns the connection string conn (a URL or keyword/value form) with its database
// changed to name.
func WithDatabase(conn, name string) string {
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		u.RawPath = ""
		return u.String()
	}
	return conn + " dbname=" + quoteKeywordValue(name)
}

func quoteKeywordValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// NoRows reports whether err is, or wraps, a query's "no rows" (pgx.ErrNoRows). What that means —
// not found, a duplicate key skipped, fenced out, nothing to do — each caller says.
func NoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
