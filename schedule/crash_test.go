package schedule_test

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/schedule"
)

// TestSchedulersSurviveSIGKILL runs an every-second catch_up schedule on three reactor processes
// (each an effects client with a scheduler) and SIGKILLs one of them, then starts another, again
// and again — at random points of their rounds, between the lock, the enqueue and the advance.
// Afterwards each tick of the window has exactly one effect, inserted once, and none is missing.
func TestSchedulersSurviveSIGKILL(t *testing.T) {
	pool := pgtest.NewDB(t)
	start := func() *proctest.Process {
		return testkit.StartChild(t, childEnv+"=1", "DATABASE_URL="+pool.Config().ConnString())
	}
	reactors := []*proctest.Process{start(), start(), start()}
	put(t, pool, schedule.Definition{Name: "beat", Interval: time.Second, Missed: schedule.CatchUp})
	began := time.Now()

	kills := 0
	for time.Since(began) < 8*time.Second {
		time.Sleep(time.Duration(200+rand.IntN(500)) * time.Millisecond)
		i := rand.IntN(len(reactors))
		reactors[i].Signal(t, syscall.SIGKILL)
		reactors[i].Wait(t, 10*time.Second)
		kills++
		reactors[i] = start()
	}
	ended := time.Now()
	// The survivors catch up on whatever the killed ones left due.
	require.Eventually(t, func() bool {
		var next time.Time
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT next_tick FROM reckon_schedules WHERE name = 'beat'`).Scan(&next))
		return next.After(ended)
	}, 15*time.Second, 50*time.Millisecond)

	got := ticks(t, pool, "beat") // one effect per tick, each inserted once
	testkit.RequireConsecutive(t, got, time.Second)
	require.False(t, got[0].After(began.Add(time.Second)), "the first tick of the window is there: %s", got[0])
	require.False(t, got[len(got)-1].Before(ended.Add(-time.Second)), "the last tick of the window is there: %s", got[len(got)-1])
	t.Logf("%d SIGKILLs; %d ticks from %s to %s, each enqueued once", kills, len(got), got[0].Format(time.TimeOnly), got[len(got)-1].Format(time.TimeOnly))
}
