package effects

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// forgetGone deletes the reactors silent for over a day whose liveness lock is free, and keeps
// the one whose lock a live session holds (restarted under the same id) and the recent ones.
func TestForgetGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	client, err := NewClient(pool, &Config{Registry: NewRegistry()})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO reckon_reactors (id, queue, started_at, heartbeat_at) VALUES
		('gone', 'reckon', now() - interval '3 days', now() - interval '2 days'),
		('held', 'reckon', now() - interval '3 days', now() - interval '2 days'),
		('recent', 'reckon', now() - interval '1 hour', now() - interval '1 hour')`)
	require.NoError(t, err)
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	locked, err := reactorLock("held").TryLock(ctx, holder)
	require.NoError(t, err)
	require.True(t, locked)
	defer reactorLock("held").Unlock(ctx, holder) //nolint:errcheck // released with the connection's test

	forgotten, err := client.forgetGone(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, forgotten)
	rows, err := pool.Query(ctx, `SELECT id FROM reckon_reactors ORDER BY id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"held", "recent"}, left)
}
