package schedule_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/schedule"
)

// A started scheduler enqueues each tick of an every-second schedule once, in order, with no tick
// left out, and its effects are dispatched.
func TestScheduleFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	reg := prometheus.NewRegistry()
	_, client := newScheduler(t, pool, 20*time.Millisecond, reg)
	put(t, pool, schedule.Definition{Name: "heartbeat", Interval: time.Second, Args: []byte(`{"report":"hb"}`)})
	testkit.Start(t, client)

	require.Eventually(t, func() bool { return len(ticks(t, pool, "heartbeat")) >= 3 }, 10*time.Second, 20*time.Millisecond)
	got := ticks(t, pool, "heartbeat")
	testkit.RequireConsecutive(t, got, time.Second)
	require.Equal(t, 0, testkit.Count(t, pool, `SELECT count(*) FROM reckon_effects WHERE args <> '{"report":"hb"}'::jsonb`))
	require.GreaterOrEqual(t, testkit.Metric(t, reg, "reckon_schedule_ticks_total", nil), 3.0)

	s, err := schedule.Get(context.Background(), pool, "acme", "heartbeat")
	require.NoError(t, err)
	require.NotNil(t, s.LastEffectID)
	require.True(t, s.NextTick.After(*s.LastTick))
	first := testkit.Wait(t, client, *s.LastEffectID, 10*time.Second)
	require.Equal(t, "CONFIRMED", string(first.State))
	require.Empty(t, s.LastError)
}

// A tick a round handles again (its next_tick put back) meets its own effect: still one.
func TestTickEnqueuedAgainIsTheSameEffect(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	s, _ := newScheduler(t, pool, time.Second, nil)
	put(t, pool, schedule.Definition{Name: "hourly", Interval: time.Hour})
	tick := steadyNow(time.Hour)
	for range 3 {
		setNextTick(t, pool, "hourly", tick)
		_, err := s.Round(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, []time.Time{tick}, ticks(t, pool, "hourly"))
	got, err := schedule.Get(context.Background(), pool, "acme", "hourly")
	require.NoError(t, err)
	require.Equal(t, tick.Add(time.Hour), got.NextTick)
}

// Two schedulers whose rounds race over the same missed ticks enqueue each tick once, and none
// is left out.
func TestTwoSchedulersEnqueueEachTickOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	a, _ := newScheduler(t, pool, time.Second, nil)
	b, _ := newScheduler(t, pool, time.Second, nil)
	put(t, pool, schedule.Definition{Name: "sync", Interval: time.Minute, Missed: schedule.CatchUp})
	latest := steadyNow(time.Minute)
	for range 5 {
		setNextTick(t, pool, "sync", latest.Add(-30*time.Minute))
		var wg sync.WaitGroup
		for _, s := range []*schedule.Scheduler{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Round(context.Background())
				require.NoError(t, err)
			}()
		}
		wg.Wait()
	}
	got := ticks(t, pool, "sync")
	require.Len(t, got, 31)
	require.Equal(t, latest.Add(-30*time.Minute), got[0])
	testkit.RequireConsecutive(t, got, time.Minute)
}

// After an outage, skip enqueues the latest missed tick only and catch_up each one, in order.
func TestMissedTicksSkipOrCatchUp(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	reg := prometheus.NewRegistry()
	s, _ := newScheduler(t, pool, time.Second, reg)
	put(t, pool, schedule.Definition{Name: "skipper", Interval: time.Minute})
	put(t, pool, schedule.Definition{Name: "catcher", Interval: time.Minute, Missed: schedule.CatchUp})
	latest := steadyNow(time.Minute)
	setNextTick(t, pool, "skipper", latest.Add(-10*time.Minute))
	setNextTick(t, pool, "catcher", latest.Add(-10*time.Minute))
	more, err := s.Round(context.Background())
	require.NoError(t, err)
	require.False(t, more)

	require.Equal(t, []time.Time{latest}, ticks(t, pool, "skipper"))
	caught := ticks(t, pool, "catcher")
	require.Len(t, caught, 11)
	require.Equal(t, latest.Add(-10*time.Minute), caught[0])
	testkit.RequireConsecutive(t, caught, time.Minute)
	require.Equal(t, 1.0, testkit.Metric(t, reg, "reckon_schedule_missed_total", map[string]string{"policy": "skip"}))
	for _, name := range []string{"skipper", "catcher"} {
		got, err := schedule.Get(context.Background(), pool, "acme", name)
		require.NoError(t, err)
		require.Equal(t, latest.Add(time.Minute), got.NextTick, name)
		require.Equal(t, latest, *got.LastTick, name)
	}
}

// A catch-up beyond CatchUpBatch takes several rounds, and one beyond CatchUpMax keeps the latest
// CatchUpMax ticks.
func TestCatchUpIsBoundedAcrossRounds(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	s, _ := newScheduler(t, pool, time.Second, nil)
	put(t, pool, schedule.Definition{Name: "fast", Interval: time.Second, Missed: schedule.CatchUp})
	setNextTick(t, pool, "fast", time.Now().UTC().Add(-2*time.Hour).Truncate(time.Second))
	rounds := 0
	for more := true; more; rounds++ {
		var err error
		more, err = s.Round(context.Background())
		require.NoError(t, err)
		require.Less(t, rounds, 20)
	}
	got := ticks(t, pool, "fast")
	require.GreaterOrEqual(t, rounds, schedule.CatchUpMax/schedule.CatchUpBatch)
	// The latest CatchUpMax ticks due at the first round, then those that came due meanwhile.
	require.GreaterOrEqual(t, len(got), schedule.CatchUpMax)
	require.Less(t, len(got), schedule.CatchUpMax+60)
	testkit.RequireConsecutive(t, got, time.Second)
}

// A tick the effects client refuses (its connector unknown to this reactor) stays due, with the
// schedule's error recorded; once the connector is known the tick is enqueued.
func TestRefusedTickStaysDue(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	s, _ := newScheduler(t, pool, time.Second, nil)
	_, _, err := schedule.Put(context.Background(), pool, nil, schedule.Definition{
		Tenant: "acme", Name: "orphan", Connector: "not.here", Interval: time.Hour,
	}, "test")
	require.NoError(t, err)
	tick := steadyNow(time.Hour)
	setNextTick(t, pool, "orphan", tick)
	_, err = s.Round(context.Background())
	require.NoError(t, err)
	got, err := schedule.Get(context.Background(), pool, "acme", "orphan")
	require.NoError(t, err)
	require.Equal(t, tick, got.NextTick, "the tick stays due")
	require.Contains(t, got.LastError, "unknown connector")
	require.Nil(t, got.LastEffectID)

	_, err = pool.Exec(context.Background(), `UPDATE reckon_schedules SET connector = $1`, connector)
	require.NoError(t, err)
	_, err = s.Round(context.Background())
	require.NoError(t, err)
	got, err = schedule.Get(context.Background(), pool, "acme", "orphan")
	require.NoError(t, err)
	require.Empty(t, got.LastError)
	require.Equal(t, []time.Time{tick}, ticks(t, pool, "orphan"))
}

// Put creates, replaces (keeping the next tick when the timing is the same), refuses bad
// definitions without storing anything; Delete deletes; a disabled schedule is never due.
func TestPutGetListDelete(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	ctx := context.Background()
	s, _ := newScheduler(t, pool, time.Second, nil)
	created := put(t, pool, schedule.Definition{Name: "nightly", Cron: "0 2 * * *"})
	require.Equal(t, schedule.Skip, created.Missed)
	require.Equal(t, 2, created.NextTick.Hour())
	past := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute)
	setNextTick(t, pool, "nightly", past)

	replaced, isNew, err := schedule.Put(ctx, pool, newRegistry(), schedule.Definition{
		Tenant: "acme", Name: "nightly", Connector: connector, Cron: "0 2 * * *", Args: []byte(`{"v":2}`), Missed: schedule.CatchUp,
	}, "ops")
	require.NoError(t, err)
	require.False(t, isNew)
	require.Equal(t, past, replaced.NextTick, "same timing: the due tick is kept")
	require.Equal(t, "test", replaced.CreatedBy)
	require.Equal(t, "ops", replaced.UpdatedBy)

	_, _, err = schedule.Put(ctx, pool, newRegistry(), schedule.Definition{
		Tenant: "acme", Name: "nightly", Connector: connector, Cron: "0 2 * * *", Disabled: true,
	}, "ops")
	require.NoError(t, err)
	_, err = s.Round(ctx)
	require.NoError(t, err)
	require.Empty(t, ticks(t, pool, "nightly"), "a disabled schedule enqueues nothing")

	_, _, err = schedule.Put(ctx, pool, newRegistry(), schedule.Definition{
		Tenant: "acme", Name: "nightly", Connector: "nope", Cron: "0 2 * * *",
	}, "ops")
	require.ErrorIs(t, err, schedule.ErrInvalid)
	got, err := schedule.Get(ctx, pool, "acme", "nightly")
	require.NoError(t, err)
	require.Equal(t, connector, got.Connector, "a refused put changes nothing")
	require.True(t, got.Disabled)

	put(t, pool, schedule.Definition{Name: "hourly", Cron: "@hourly"})
	list, err := schedule.List(ctx, pool, &schedule.ListOpts{Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "hourly", list[0].Name)
	list, err = schedule.List(ctx, pool, &schedule.ListOpts{Tenant: "other"})
	require.NoError(t, err)
	require.Empty(t, list)

	require.NoError(t, schedule.Delete(ctx, pool, "acme", "hourly"))
	require.True(t, errors.Is(schedule.Delete(ctx, pool, "acme", "hourly"), schedule.ErrNotFound))
	_, err = schedule.Get(ctx, pool, "acme", "hourly")
	require.ErrorIs(t, err, schedule.ErrNotFound)
}
