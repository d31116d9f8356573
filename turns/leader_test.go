package turns_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

// startPlainLeader starts an effects client without turn workers on another queue, and waits
// until it is the River leader of the database (it starts first, alone).
func startPlainLeader(t *testing.T, pool *pgxpool.Pool) *effects.Client {
	t.Helper()
	plain, err := effects.NewClient(pool, &effects.Config{
		Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Workers: 2, Queue: "other-queue",
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, plain.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, plain.Stop(context.Background())) })
	require.Eventually(t, func() bool { return riverLeader(pool) == plain.ID() },
		30*time.Second, 50*time.Millisecond, "the plain client wins the leader election")
	return plain
}

func riverLeader(pool *pgxpool.Pool) string {
	var leader string
	_ = pool.QueryRow(context.Background(), `SELECT leader_id FROM river_leader`).Scan(&leader)
	return leader
}

// flakyHandler fails its first failures runs, then succeeds.
func flakyHandler(runs *atomic.Int64, failures int64) turns.Handler {
	return turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		if runs.Add(1) <= failures {
			return errors.New("transient")
		}
		return nil
	})
}

// awaitComplete waits until the session's last turn is COMPLETE and returns the session's turns.
func awaitComplete(t *testing.T, h *harness, session string, within time.Duration) []*turns.Record {
	t.Helper()
	var list []*turns.Record
	require.Eventually(t, func() bool {
		list = h.turnsOf(session)
		return len(list) > 0 && list[len(list)-1].Status == turns.StatusComplete
	}, within, 50*time.Millisecond, "the session's turn completes")
	return list
}

// Recovery does not depend on River's leader: with another River client on the database (an
// effects client without turn workers, on another queue) holding leadership, the leader's
// periodic recovery job never runs, yet a turn whose handler fails three times is taken over by
// the turns client's own ticker and completes within seconds (River's own job retries alone would
// wait 1s + 16s + 81s).
func TestRecoverRunsWithoutLeadership(t *testing.T) {
	pool := pgtest.NewDB(t)
	plain := startPlainLeader(t, pool)
	var runs atomic.Int64
	h := setupOn(t, pool, turns.Config{RecoverInterval: 500 * time.Millisecond, MaxAttempts: 5, Handler: flakyHandler(&runs, 3)})
	h.start()
	session := newSession("email")
	h.submit(session, "m1")

	list := awaitComplete(t, h, session, 30*time.Second)
	require.Equal(t, int64(4), runs.Load(), "three failed attempts, then the one that completed")
	last := list[len(list)-1]
	require.Equal(t, 4, last.Attempt)
	require.Equal(t, list[0].Group, last.Group, "the attempts continue the turn group")
	require.Equal(t, []string{"m1"}, h.messageIDs(last.ID))
	for _, r := range list[:len(list)-1] {
		require.Equal(t, turns.StatusSuperseded, r.Status)
	}
	require.Equal(t, plain.ID(), riverLeader(pool), "the plain client led throughout")
	require.Zero(t, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn_recover'`),
		"no periodic recovery job ran: recovery came from the turns client's ticker")
}

// A turn job whose turn was superseded by its own retry turn (the retry's attempt failed too)
// does not return while that retry turn is unfinished: it runs the session again. With no
// recovery at all (RecoverInterval < 0, and another client leads), the River job's own retries
// complete the turn.
func TestTurnJobFollowsItsRetryTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for River's second job retry (about 16s)")
	}
	pool := pgtest.NewDB(t)
	startPlainLeader(t, pool)
	var runs atomic.Int64
	h := setupOn(t, pool, turns.Config{RecoverInterval: -1, MaxAttempts: 5, Handler: flakyHandler(&runs, 2)})
	h.start()
	session := newSession("email")
	h.submit(session, "m1")

	list := awaitComplete(t, h, session, 60*time.Second)
	require.Equal(t, int64(3), runs.Load())
	require.Len(t, list, 3, "the first turn, its retry (superseded by the next retry), the retry that completed")
	require.Equal(t, turns.StatusSuperseded, list[0].Status)
	require.Equal(t, turns.StatusSuperseded, list[1].Status)
	require.Equal(t, 3, list[2].Attempt)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn'`))
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn' AND state = 'completed'`) == 1
	}, 30*time.Second, 50*time.Millisecond, "the one turn job carried the turn to completion")
}

// Recover is safe to run concurrently (every turns process runs it): a call that finds an
// abandoned session's mutex held — by another recoverer that took it and has not started the turn
// yet, modelled here by another connection holding the session's lock — skips the session at once instead of waiting
// (Config.AcquireTimeout is a minute here), and a later call runs the turn once.
func TestRecoverSkipsHeldSessionsAtOnce(t *testing.T) {
	ctx := context.Background()
	var runs atomic.Int64
	h := setup(t, turns.Config{AcquireTimeout: time.Minute, RecoverInterval: -1, Handler: flakyHandler(&runs, 1)})
	session := newSession("email")
	h.submit(session, "m1")
	_, err := h.tc.RunTurn(ctx, session)
	require.Error(t, err, "the first attempt fails and leaves its turn abandoned")

	// On a connection of its own: a pooled one might be the failed attempt's, whose pid the
	// turn records as its holder.
	other, err := pgx.Connect(ctx, h.pool.Config().ConnString())
	require.NoError(t, err)
	defer other.Close(ctx)
	_, err = other.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, turns.LockNamespace, session)
	require.NoError(t, err)
	boundCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ran, err := h.tc.Recover(boundCtx)
	require.NoError(t, err, "Recover skips the held session instead of waiting for it")
	require.Zero(t, ran)
	require.Equal(t, int64(1), runs.Load())
	_, err = other.Exec(ctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, turns.LockNamespace, session)
	require.NoError(t, err)

	ran, err = h.tc.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ran)
	require.Equal(t, int64(2), runs.Load(), "the recovered attempt ran once")
	list := h.turnsOf(session)
	require.Equal(t, turns.StatusComplete, list[len(list)-1].Status)
}
