package main

import (
	"context"
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
	kills := proctest.KillRandomly(t, reactors, 10*time.Second, 300*time.Millisecond, time.Second,
		func() *proctest.Process { return f.startReactor() })
	ticks := testkit.RequireTickedThrough(t, f.pool, "default", "beat", time.Second, began, time.Now())
	t.Logf("%d SIGKILLs of reactor binaries; %d ticks, each enqueued once", kills, len(ticks))
}
