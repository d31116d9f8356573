package turns_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

// With Config.Queue, turn jobs go to a queue of their own that only the processes attaching a
// turns client work: a reactor without the turn workers on the effects queue (started first,
// polling every 50ms) never fetches one, and the turn job completes on its first attempt without
// an error recorded.
func TestTurnsQueueOfTheirOwn(t *testing.T) {
	ran := make(chan struct{}, 10)
	h := setup(t, turns.Config{Queue: "reckon_turns", QueueWorkers: 3, Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		ran <- struct{}{}
		return nil
	})})
	plain, err := effects.NewClient(h.pool, &effects.Config{
		Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Workers: 10,
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.Equal(t, h.ec.Queue(), plain.Queue(), "the plain reactor works the effects queue")
	require.NoError(t, plain.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, plain.Stop(context.Background())) })

	session := newSession("email")
	h.submit(session, "m1")
	h.start()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not run")
	}
	awaitComplete(t, h, session, 30*time.Second)
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn' AND state = 'completed'`) == 1
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn' AND queue = 'reckon_turns'
		AND attempt = 1 AND coalesce(cardinality(errors), 0) = 0`), "fetched once, by the turns client, with no error")
}

// A bad queue configuration is refused with a clear error.
func TestTurnsQueueConfigErrors(t *testing.T) {
	handler := turns.HandlerFunc(func(context.Context, *turns.Turn) error { return nil })
	_, err := turns.NewClient(nil, &turns.Config{Handler: handler, QueueWorkers: -1})
	require.ErrorContains(t, err, "QueueWorkers")

	pool := pgtest.NewDB(t)
	_, _, err = clients(pool, effects.NewRegistry(), turns.Config{Handler: handler, Queue: "no spaces allowed"}, prometheus.NewRegistry())
	require.ErrorContains(t, err, `queue name is invalid`)
	require.ErrorContains(t, err, `"no spaces allowed"`)
}
