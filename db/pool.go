package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// ConfigurePool prepares a pool configuration for Reckon: every connection encodes and decodes
// github.com/google/uuid values directly. Without it they still work, through pgx's generic
// driver.Valuer path, which formats every uuid as text and parses it back (for the uuid arrays of
// batched statements, a measurable part of a reactor's CPU). An AfterConnect already set is kept
// and runs first.
func ConfigurePool(config *pgxpool.Config) {
	previous := config.AfterConnect
	config.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if previous != nil {
			if err := previous(ctx, conn); err != nil {
				return err
			}
		}
		pgxuuid.Register(conn.TypeMap())
		return nil
	}
}
