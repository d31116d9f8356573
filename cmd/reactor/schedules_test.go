package main

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/schedule"
)

// Three reactor binaries run the scheduler of an every-second catch_up schedule; one of them is
// SIGKILLed and replaced every 0.3 to 1 s, at whatever point of its rounds. Afterwards every tick
// of the window has exactly one effect, inserted once, and none is missing.
func TestScheduleTicksOnceAcrossKilledReactors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.put(f.bankWire("bank.wire", 5*time.Second))
	reactors := []*proctest.Process{f.startReactor(), f.startReactor(), f.startReactor()}
	_, _, err := schedule.Put(ctx, f.pool, f.registry, schedule.Definition{
		Tenant: "default", Name: "beat", Connector: "bank.wire", Args: []byte(`{"account":"acc-1","amount":1}`),
		Interval: time.Second, Missed: schedule.CatchUp,
	}, "test")
	require.NoError(t, err)
	began := time.Now()
	kills := 0
	for time.Since(began) < 10*time.Second {
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		i := rand.IntN(len(reactors))
		reactors[i].Signal(t, syscall.SIGKILL)
		reactors[i].Wait(t, 10*time.Second)
		kills++
		reactors[i] = f.startReactor()
	}
	ended := time.Now()
	require.Eventually(t, func() bool {
		var next time.Time
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT next_tick FROM reckon_schedules WHERE name = 'beat'`).Scan(&next))
		return next.After(ended)
	}, 20*time.Second, 50*time.Millisecond, "the live reactors catch up")

	ticks := testkit.ScheduledTicks(t, f.pool, "default", "beat")
	require.NotEmpty(t, ticks)
	testkit.RequireConsecutive(t, ticks, time.Second)
	require.False(t, ticks[0].After(began.Add(time.Second)), "the window's first tick: %s", ticks[0])
	require.False(t, ticks[len(ticks)-1].Before(ended.Add(-time.Second)), "the window's last tick: %s", ticks[len(ticks)-1])
	t.Logf("%d SIGKILLs of reactor binaries; %d ticks, each enqueued once", kills, len(ticks))
}
