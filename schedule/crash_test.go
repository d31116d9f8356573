package schedule_test

import (
	"testing"
	"time"

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
	kills := proctest.KillRandomly(t, reactors, 8*time.Second, 200*time.Millisecond, 700*time.Millisecond, start)
	got := testkit.RequireTickedThrough(t, pool, "acme", "beat", time.Second, began, time.Now())
	t.Logf("%d SIGKILLs; %d ticks from %s to %s, each enqueued once", kills, len(got), got[0].Format(time.TimeOnly), got[len(got)-1].Format(time.TimeOnly))
}
