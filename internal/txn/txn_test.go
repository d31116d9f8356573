package txn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/txn"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A transaction that Postgres aborts for a serialization failure, as a deadlock victim or at
// lock_timeout is run
// again from the start (what the aborted attempts wrote is gone); any other error is returned at
// once; a panic rolls back; a transaction aborted every time gives up after Attempts.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	_, err := pool.Exec(ctx, `CREATE TABLE attempts (n int NOT NULL)`)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&n))
		return n
	}
	abort := func(tx pgx.Tx, code string) error {
		_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'aborted' USING ERRCODE = '`+code+`'; END $$`)
		return err
	}

	for _, code := range []string{"40001", "40P01", "55P03"} {
		_, err := pool.Exec(ctx, `TRUNCATE attempts`)
		require.NoError(t, err)
		runs := 0
		err = txn.Run(ctx, pool, nil, func(tx pgx.Tx) error {
			runs++
			if _, err := tx.Exec(ctx, `INSERT INTO attempts VALUES ($1)`, runs); err != nil {
				return err
			}
			if runs < 3 {
				return abort(tx, code)
			}
			return nil
		})
		require.NoError(t, err, code)
		require.Equal(t, 3, runs, code)
		require.Equal(t, 1, count(), "only the committed attempt's row is left (%s)", code)
	}

	runs := 0
	err = txn.Run(ctx, pool, nil, func(tx pgx.Tx) error { runs++; return abort(tx, "23505") })
	require.Error(t, err)
	require.False(t, txn.Transient(err))
	require.Equal(t, 1, runs, "a unique violation is not run again")

	runs = 0
	err = txn.Run(ctx, pool, nil, func(tx pgx.Tx) error { runs++; return abort(tx, "40001") })
	require.True(t, txn.Transient(err))
	require.Equal(t, txn.Attempts, runs)

	_, err = pool.Exec(ctx, `TRUNCATE attempts`)
	require.NoError(t, err)
	require.Panics(t, func() {
		_ = txn.Run(ctx, pool, nil, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO attempts VALUES (1)`); err != nil {
				return err
			}
			panic("boom")
		})
	})
	require.Equal(t, 0, count(), "a panic rolls back")
	require.False(t, txn.Transient(errors.New("plain")))
}

// Retry with a policy: no bound on attempts but MaxWait, each new try logged with its attrs; a
// pause that would end past MaxWait gives up with the last error.
func TestRetryMaxWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	runs := 0
	start := time.Now()
	err := txn.Retry(ctx, logger, txn.Policy{Attempts: -1, MaxWait: 300 * time.Millisecond,
		Pause: func(int) time.Duration { return 50 * time.Millisecond }, Message: "again"}, func() error {
		runs++
		return fmt.Errorf("busy: %w", &pgconn.PgError{Code: "55P03"}) // no I/O: the timing is the pauses'
	}, slog.String("what", "test"))
	require.True(t, txn.Transient(err))
	require.Less(t, time.Since(start), time.Second)
	require.GreaterOrEqual(t, runs, 4, "tries until MaxWait, not Attempts")
	require.LessOrEqual(t, runs, 7)
	require.Equal(t, runs-1, strings.Count(logs.String(), "msg=again"), logs.String())
	require.Contains(t, logs.String(), "what=test")

	runs = 0
	require.NoError(t, txn.Retry(ctx, nil, txn.Policy{Attempts: -1}, func() error {
		runs++
		if runs < 8 { // more than Attempts: the policy's bound, not Run's
			_, err := pool.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'deadlock' USING ERRCODE = '40P01'; END $$`)
			return err
		}
		return nil
	}))
	require.Equal(t, 8, runs)
}
