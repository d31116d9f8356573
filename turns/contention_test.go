package turns_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/turns"
)

// startChild starts this test binary as a separate process in the given child mode on the
// harness's database, and returns once it is ready.
func (h *harness) startChild(mode, session string, env ...string) *proctest.Process {
	h.t.Helper()
	return testkit.StartChild(h.t, append([]string{
		childEnv + "=" + mode,
		"DATABASE_URL=" + h.pool.Config().ConnString(),
		"SESSION=" + session,
	}, env...)...)
}

// 50 goroutines here and two other processes contend for one session: never are two of its turns
// processed at once, and every message ends in a COMPLETE turn.
func TestContentionAcrossGoroutinesAndProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool0 := pgtest.NewDB(t)
	// Enough connections for the goroutines to wait on the lock, not only on the pool.
	config, err := pgxpool.ParseConfig(pool0.Config().ConnString())
	require.NoError(t, err)
	config.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	h := setupOn(t, pool, turns.Config{Handler: probeHandler(pool), AcquireTimeout: 2 * time.Minute})
	session := newSession("web")

	// Hold the start gate so that all contenders begin together.
	gate, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = gate.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, gateKey[0], gateKey[1])
	require.NoError(t, err)
	const perChild = 15
	children := []*proctest.Process{
		h.startChild("contend", session, "CHILD_N=15", "CHILD_PREFIX=a"),
		h.startChild("contend", session, "CHILD_N=15", "CHILD_PREFIX=b"),
	}
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND NOT granted`, gateKey[0], gateKey[1]) == 2
	}, 30*time.Second, 10*time.Millisecond, "both children wait at the gate")
	local := make(chan []error, 1)
	go func() { local <- contend(ctx, h.tc, session, "p", 50) }()
	_, err = gate.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, gateKey[0], gateKey[1])
	require.NoError(t, err)
	gate.Release()

	require.Empty(t, <-local)
	for _, child := range children {
		require.Equal(t, 0, child.Wait(t, 2*time.Minute), child.Stderr())
	}

	total := (50 + 2*perChild) * contendRounds
	require.Equal(t, total, h.count(`SELECT count(*) FROM reckon_messages WHERE session_key = $1`, session))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_messages m JOIN reckon_turns t ON t.id = m.turn_id
		WHERE m.session_key = $1 AND t.status <> 'COMPLETE'`, session), "every message is in a COMPLETE turn")
	records := h.turnsOf(session)
	for _, r := range records {
		require.Equal(t, turns.StatusComplete, r.Status, "turn %d", r.Seq)
	}
	var maxSeen, runs, maxProcessing int
	require.NoError(t, pool.QueryRow(ctx, `SELECT max_seen, runs, max_processing FROM probe WHERE session_key = $1`, session).Scan(&maxSeen, &runs, &maxProcessing))
	require.Equal(t, 1, maxSeen, "never two handlers of the session at once")
	require.Equal(t, 1, maxProcessing, "never two PROCESSING turns of the session")
	require.Equal(t, len(records), runs, "one handler run per turn")
	require.Equal(t, len(records), h.count(`SELECT count(*) FROM app_notes`), "every turn committed its mutation once")
	require.GreaterOrEqual(t, len(records), contendRounds, "each contender's messages are in different turns")
	t.Logf("%d messages in %d turns", total, len(records))
}
