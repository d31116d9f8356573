package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// Config.JobRetention is the period of River's job cleaner: completed and cancelled jobs older
// than it are deleted, discarded ones only after seven days (River's default) when it is shorter.
func TestJobRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	insert := func(state string, age time.Duration) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO river_job (state, attempt, max_attempts, kind, queue, args, finalized_at, scheduled_at, attempted_at)
		    VALUES ($1, 1, 1, 'old_job', 'elsewhere', '{}', now() - $2::interval, now() - $2::interval, now() - $2::interval) RETURNING id`,
			state, age.String()).Scan(&id))
		return id
	}
	gone := []int64{insert("completed", 2*time.Hour), insert("cancelled", 2*time.Hour), insert("discarded", 8*24*time.Hour)}
	kept := []int64{insert("completed", 30*time.Minute), insert("discarded", 2*24*time.Hour)}

	config := testkit.FastConfig(effects.NewRegistry())
	config.JobRetention = time.Hour
	client := testkit.NewClient(t, pool, config)
	testkit.Start(t, client)
	require.Eventually(t, func() bool {
		return testkit.Count(t, pool, `SELECT count(*) FROM river_job WHERE id = ANY($1)`, gone) == 0
	}, 20*time.Second, 50*time.Millisecond, "River's cleaner deleted the jobs past JobRetention")
	require.Equal(t, len(kept), testkit.Count(t, pool, `SELECT count(*) FROM river_job WHERE id = ANY($1)`, kept))

	config.JobRetention = -time.Second
	_, err := effects.NewClient(pool, config)
	require.ErrorContains(t, err, "Config.JobRetention")
}
