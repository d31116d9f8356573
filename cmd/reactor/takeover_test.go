package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// waitPerformed returns once the bank performed a wire with key.
func (f *fixture) waitPerformed(key string, p *proctest.Process) {
	f.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-f.bank.Performed():
			if e.Key == key {
				return
			}
		case <-deadline:
			f.t.Fatalf("the bank never performed %s\n%s", key, p.Stderr())
		}
	}
}

// Two reactor binaries run; the one whose HTTP call the bank performed and then hung is SIGKILLed.
// The other takes its dispatch job over within seconds (its in-flight margin is a minute, so the
// sweeper cannot be what finishes it), finds the wire by status check and confirms it: performed
// once, and no River job left running.
func TestKilledReactorsWorkTakenOverByTheOther(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 30*time.Second))
	f.bank.Script("killed-mid-call", fakebank.PerformThenHang)
	first := f.startReactor("-in-flight-margin", "1m")
	effect := f.enqueue("bank.wire", "killed-mid-call", 100)
	f.waitPerformed("killed-mid-call", first)
	second := f.startReactor("-in-flight-margin", "1m")

	killed := time.Now()
	first.Signal(t, syscall.SIGKILL)
	first.Wait(t, 10*time.Second)
	settled := f.wait(effect)
	t.Logf("confirmed %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
	require.Less(t, time.Since(killed), 15*time.Second, "the takeover bound (10s) plus the status check")
	require.Equal(t, effects.StateConfirmed, settled.State)
	require.Equal(t, "PENDING → UNKNOWN → CONFIRMED", f.path(effect))
	require.Equal(t, 1, f.bank.Count("killed-mid-call"))
	var running, dead int
	require.Eventually(t, func() bool {
		require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&running))
		return running == 0
	}, 10*time.Second, 20*time.Millisecond)
	// The killed reactor's dispatch job was taken over; its retention job, which it runs at start,
	// may still have been marked running too (River records completions in batches).
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT count(*) FROM reckon_reactors WHERE dead_at IS NOT NULL AND jobs_taken_over >= 1`).Scan(&dead))
	require.Equal(t, 1, dead)

	second.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
	var left int
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT count(*) FROM reckon_reactors WHERE dead_at IS NULL`).Scan(&left))
	require.Equal(t, 0, left, "a reactor that stopped cleanly unregisters")
}

// A reactor loses its liveness connection (ended on the server) and, before it gets it back, the
// other reactor takes it for dead and takes its call over. The reactor taken for dead stops its
// work and exits with status 1 (to be restarted), saying why; the wire is performed once.
func TestReactorTakenForDeadExits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.put(f.bankWire("bank.wire", 30*time.Second))
	f.bank.Script("cut-off", fakebank.Timeout, fakebank.Succeed)
	// It beats every 5s; the other takes over at the first sight of a free lock (no grace).
	cutOff := f.startReactor("-in-flight-margin", "1m", "-liveness-interval", "5s", "-heartbeat-timeout", "1m")
	effect := f.enqueue("bank.wire", "cut-off", 100)
	require.Eventually(t, func() bool { return f.bank.Calls("/reckon/wires") == 1 }, 30*time.Second, 10*time.Millisecond, cutOff.Stderr())
	other := f.startReactor("-in-flight-margin", "1m", "-takeover-grace", "0")

	var ended int
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid))
		FROM pg_locks l JOIN river_job j ON l.objid::bigint = (hashtext(j.attempted_by[cardinality(j.attempted_by)])::bigint & 4294967295)
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid::bigint = ($1::integer::bigint & 4294967295)
		  AND j.state = 'running' AND j.kind = 'reckon_dispatch'`, effects.ReactorLockNamespace).Scan(&ended))
	require.Equal(t, 1, ended, "the liveness connection of the reactor running the call")

	require.Equal(t, 1, cutOff.Wait(t, 30*time.Second), cutOff.Stderr())
	require.Contains(t, cutOff.Stderr(), "this reactor lost its database connection and was taken for dead")
	settled := f.wait(effect)
	require.Equal(t, effects.StateConfirmed, settled.State, other.Stderr())
	require.Equal(t, 1, f.bank.Count("cut-off"))
}
