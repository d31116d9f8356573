package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/service"
)

// recorder makes services that log their starts and stops.
type recorder struct{ log []string }

func (r *recorder) service(name string, startErr error) service.Service {
	return service.Func(func(context.Context) error {
		if startErr != nil {
			r.log = append(r.log, "fail "+name)
			return startErr
		}
		r.log = append(r.log, "start "+name)
		return nil
	}, func(context.Context) error {
		r.log = append(r.log, "stop "+name)
		return nil
	})
}

func TestListStartsInOrderAndStopsInReverseOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var r recorder
	var l service.List
	l.Add(r.service("a", nil), r.service("b", nil), r.service("c", nil))
	require.NoError(t, l.Stop(ctx), "a stop before any start does nothing")
	require.NoError(t, l.Start(ctx))
	require.Error(t, l.Start(ctx), "started already")
	require.NoError(t, l.Stop(ctx))
	require.NoError(t, l.Stop(ctx), "a second stop does nothing")
	require.NoError(t, l.Start(ctx), "started again after a stop")
	require.NoError(t, l.Stop(ctx))
	require.Equal(t, []string{
		"start a", "start b", "start c", "stop c", "stop b", "stop a",
		"start a", "start b", "start c", "stop c", "stop b", "stop a",
	}, r.log)
}

func TestListStopsTheStartedOnesWhenAStartFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var r recorder
	var l service.List
	boom := errors.New("boom")
	l.Add(r.service("a", nil), r.service("b", nil), r.service("c", boom), r.service("d", nil))
	require.ErrorIs(t, l.Start(ctx), boom)
	require.NoError(t, l.Stop(ctx), "nothing left to stop")
	require.Equal(t, []string{"start a", "start b", "fail c", "stop b", "stop a"}, r.log)
}

func TestListStopJoinsErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var l service.List
	for i := range 2 {
		l.Add(service.Func(func(context.Context) error { return nil },
			func(context.Context) error { return fmt.Errorf("stop %d", i) }))
	}
	require.NoError(t, l.Start(ctx))
	require.EqualError(t, l.Stop(ctx), "stop 1\nstop 0")
}

func TestLoopRunsUntilStoppedAndRestarts(t *testing.T) {
	t.Parallel()
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	running := make(chan string, 1)
	ended := make(chan struct{}, 1)
	loop := service.NewLoop(func(ctx context.Context) {
		running <- ctx.Value(key{}).(string)
		<-ctx.Done()
		ended <- struct{}{}
	})
	for range 2 {
		require.NoError(t, loop.Start(ctx))
		require.Equal(t, "v", <-running, "the loop's context carries Start's values")
		require.Error(t, loop.Start(ctx), "started already")
		require.NoError(t, loop.Stop(ctx))
		require.Len(t, ended, 1, "Stop returns once the function has returned")
		<-ended
		require.NoError(t, loop.Stop(ctx), "a second stop does nothing")
	}
	require.NoError(t, loop.Start(ctx))
	<-running
	cancel()
	require.Empty(t, ended, "cancelling Start's context does not stop the loop")
	require.NoError(t, loop.Stop(context.Background()))
}

func TestPreparedLoopFailsStart(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	loop := service.NewPreparedLoop(func(context.Context) (func(context.Context), error) { return nil, boom })
	require.ErrorIs(t, loop.Start(context.Background()), boom)
	require.NoError(t, loop.Stop(context.Background()), "nothing started")
}
