package effects

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reckonhq/reckon/db"
)

// checkSchema returns ErrSchemaNotCurrent, naming what is pending, unless every migration of
// Reckon and River is applied.
func (c *Client) checkSchema(ctx context.Context) error {
	migrator, err := db.NewMigrator(c.pool, &db.MigratorConfig{Logger: c.logger})
	if err != nil {
		return err
	}
	status, err := migrator.Status(ctx)
	if err != nil {
		return fmt.Errorf("effects: read the schema's migrations: %w", err)
	}
	if status.Current() {
		return nil
	}
	return fmt.Errorf("%w (%d of Reckon's and %d of River's migrations pending)", ErrSchemaNotCurrent, len(status.Pending), status.RiverPending)
}

// SchemaError makes the error of a statement that met a missing table, column, type or function
// wrap ErrSchemaNotCurrent, keeping Postgres's error; any other error is returned as it is. For
// packages built on effects (saga's metrics) that read tables a newer migration adds.
func SchemaError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.UndefinedObject, pgerrcode.UndefinedFunction:
		return fmt.Errorf("%w: %w", ErrSchemaNotCurrent, err)
	}
	return err
}
