package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnsureDatabase creates the database that databaseURL names if it does not exist yet, connecting
// to the server's "postgres" database to do so. It reports whether it created it. Two callers at
// once are fine: the loser of the race sees the database as existing.
func EnsureDatabase(ctx context.Context, databaseURL string) (created bool, err error) {
	config, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return false, fmt.Errorf("parse database URL: %w", err)
	}
	name := config.Database
	if name == "" {
		return false, errors.New("ensure database: the database URL names no database")
	}
	config.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return false, fmt.Errorf("ensure database %q: connect to the postgres database: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("ensure database %q: %w", name, err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DuplicateDatabase {
			return false, nil
		}
		return false, fmt.Errorf("ensure database %q: create: %w", name, err)
	}
	return true, nil
}
