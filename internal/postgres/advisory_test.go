package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A session lock is held by its connection across transactions until Unlock or the connection's
// end; a transaction lock until the transaction ends; either kind keeps the other from the lock.
// Locks of another namespace or name are apart.
func TestAdvisoryLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	connect := func() *pgx.Conn {
		conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	holder, other := connect(), connect()
	lock := postgres.AdvisoryLock{Namespace: 0x54455354, Name: "session-1"}

	locked, err := lock.TryLock(ctx, holder)
	require.NoError(t, err)
	require.True(t, locked)
	locked, err = lock.TryLock(ctx, other)
	require.NoError(t, err)
	require.False(t, locked, "held by the holder's session")
	for _, apart := range []postgres.AdvisoryLock{{Namespace: lock.Namespace + 1, Name: lock.Name}, {Namespace: lock.Namespace, Name: "session-2"}} {
		locked, err = apart.TryLock(ctx, other)
		require.NoError(t, err)
		require.True(t, locked, "%+v is another lock", apart)
	}

	// The lock outlives a transaction of the holder, and a waiting Lock ends at lock_timeout.
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	_, err = other.Exec(ctx, `SET lock_timeout = '50ms'`)
	require.NoError(t, err)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, lock.Lock(ctx, other), &pgErr)
	require.Equal(t, pgerrcode.LockNotAvailable, pgErr.Code)
	otherTx, err := other.Begin(ctx)
	require.NoError(t, err)
	locked, err = lock.TryLockTx(ctx, otherTx)
	require.NoError(t, err)
	require.False(t, locked, "a session lock keeps transaction locks out")
	require.NoError(t, otherTx.Rollback(ctx))

	unlocked, err := lock.Unlock(ctx, other)
	require.NoError(t, err)
	require.False(t, unlocked, "not held by this session")
	unlocked, err = lock.Unlock(ctx, holder)
	require.NoError(t, err)
	require.True(t, unlocked)
	require.NoError(t, lock.Lock(ctx, other), "free once unlocked")
	unlocked, err = lock.Unlock(ctx, other)
	require.NoError(t, err)
	require.True(t, unlocked)

	// A transaction lock is freed when its transaction ends.
	tx, err = holder.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, lock.LockTx(ctx, tx))
	locked, err = lock.TryLock(ctx, other)
	require.NoError(t, err)
	require.False(t, locked, "held by the holder's transaction")
	otherTx, err = other.Begin(ctx)
	require.NoError(t, err)
	locked, err = lock.TryLockTx(ctx, otherTx)
	require.NoError(t, err)
	require.False(t, locked)
	require.NoError(t, otherTx.Rollback(ctx))
	require.NoError(t, tx.Commit(ctx))
	otherTx, err = other.Begin(ctx)
	require.NoError(t, err)
	locked, err = lock.TryLockTx(ctx, otherTx)
	require.NoError(t, err)
	require.True(t, locked, "freed when the holder's transaction ended")
	require.NoError(t, otherTx.Commit(ctx))
	locked, err = lock.TryLock(ctx, holder)
	require.NoError(t, err)
	require.True(t, locked, "freed when the other's transaction ended")
}
