// Package txn runs Reckon's transactions: one helper that begins, commits or rolls back, and runs
// again a transaction that Postgres aborted only because of other transactions (a deadlock, a
// serialization failure, a lock wait cut short by lock_timeout — e.g. a migration's lock during an
// online upgrade). The migrator uses the same retry with a policy of its own (Policy, Retry).
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

// Policy says how Retry runs an operation again. The zero value is Run's: Attempts tries, pauses
// of attempt² × 10 ms (10, 40, 90, 160 ms), no bound on the total wait but the context's.
type Policy struct {
	// Attempts bounds the tries, the first included. Default (0): Attempts (5); negative: no bound
	// but MaxWait and the context.
	Attempts int
	// MaxWait bounds the time from the first try after which no new try starts. Default (0): none.
	MaxWait time.Duration
	// Pause is the pause after the given failed try (1 for the first). Default: attempt² × 10 ms.
	Pause func(attempt int) time.Duration
	// Message is the warning logged before each new try. Default: "transaction aborted by
	// Postgres; running it again".
	Message string
}

// Retry runs op, and runs it again while it fails with an error Transient accepts, as policy
// allows, after a pause; each new try is logged at warning level on logger (nil: not logged) with
// the attempt, the error and attrs. It returns op's last error, or nil. A context that ends stops
// the retries (the last error is returned). op must be safe to run more than once: a transient
// error means Postgres rolled back what op's try wrote.
func Retry(ctx context.Context, logger *slog.Logger, policy Policy, op func() error, attrs ...slog.Attr) error {
	attempts := policy.Attempts
	if attempts == 0 {
		attempts = Attempts
	}
	pause := policy.Pause
	if pause == nil {
		pause = func(attempt int) time.Duration { return time.Duration(attempt*attempt) * 10 * time.Millisecond }
	}
	message := policy.Message
	if message == "" {
		message = "transaction aborted by Postgres; running it again"
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := op()
		if !Transient(err) || attempt == attempts || ctx.Err() != nil {
			return err
		}
		wait := pause(attempt)
		if policy.MaxWait > 0 && time.Since(start)+wait > policy.MaxWait {
			return err
		}
		if logger != nil {
			logger.LogAttrs(ctx, slog.LevelWarn, message,
				append([]slog.Attr{slog.Int("attempt", attempt), slog.String("error", err.Error()),
					slog.Duration("pause", wait)}, attrs...)...)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Run runs fn in a transaction on db: committed if fn returns nil, rolled back if it returns an
// error or panics. A transaction that Postgres aborts as a deadlock victim (40P01), for a
// serialization failure (40001) or because a lock wait reached lock_timeout (55P03) is run again
// from the start, up to Attempts times, after a short growing pause (Retry with the zero Policy);
// fn must therefore only write through tx, and may run more than once. Each retry is logged at
// warning level on logger (nil: not logged).
func Run(ctx context.Context, db Beginner, logger *slog.Logger, fn func(tx pgx.Tx) error) error {
	return Retry(ctx, logger, Policy{}, func() error { return Once(ctx, db, fn) })
}

// Once runs fn in a transaction on db, once: committed if fn returns nil, rolled back if it
// returns an error or panics. It is for a transaction that must not run again — one whose lock
// wait cut short by lock_timeout is its answer (a mutex's wait, a DDL that is deferred), or one
// on a connection whose session state fn relies on — and for nothing else: Run is the default.
func Once(ctx context.Context, db Beginner, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, fn)
}

// Transient reports whether err is Postgres aborting a transaction that may succeed if run again:
// a deadlock victim (40P01), a serialization failure (40001), or a lock not granted within
// lock_timeout (55P03, also what NOWAIT raises: a caller that means "skip if locked" must not run
// that statement under Run).
func Transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(pgErr.Code == pgerrcode.DeadlockDetected || pgErr.Code == pgerrcode.SerializationFailure ||
			pgErr.Code == pgerrcode.LockNotAvailable)
}
