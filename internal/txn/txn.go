// Package txn runs Reckon's transactions: one helper that begins, commits or rolls back, and runs
// again a transaction that Postgres aborted only because of other transactions.
package txn

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Attempts bounds how often Run runs a transaction that Postgres keeps aborting.
const Attempts = 5

// Beginner is what Run needs of a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Run runs fn in a transaction on db: committed if fn returns nil, rolled back if it returns an
// error or panics. A transaction that Postgres aborts as a deadlock victim (40P01) or for a
// serialization failure (40001) is run again from the start, up to Attempts times, after a short
// growing pause; fn must therefore only write through tx, and may run more than once. Each retry
// is logged at warning level on logger (nil: not logged).
func Run(ctx context.Context, db Beginner, logger *slog.Logger, fn func(tx pgx.Tx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = pgx.BeginFunc(ctx, db, fn)
		if attempt == Attempts || !Transient(err) {
			return err
		}
		if logger != nil {
			logger.WarnContext(ctx, "transaction aborted by Postgres; running it again",
				slog.Int("attempt", attempt), slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * 10 * time.Millisecond):
		}
	}
}

// Transient reports whether err is Postgres aborting a transaction that may succeed if run again:
// a deadlock victim or a serialization failure.
func Transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(pgErr.Code == pgerrcode.DeadlockDetected || pgErr.Code == pgerrcode.SerializationFailure)
}
