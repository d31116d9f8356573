package turns_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/turns"
)

// A reactor is SIGKILLed while its River job works a session's turn, in each state the turn can be
// in while the job runs. A live reactor — whose periodic recovery is off, so that only the takeover
// can explain it — runs the session again within seconds: every message, including those that
// arrived while the dead reactor held the job, is handled in one COMPLETE turn, the turn's effect
// is enqueued and performed once, and no handler ran twice at once.
func TestTakeoverOfTurnJob(t *testing.T) {
	t.Parallel()
	for _, state := range []turns.Status{turns.StatusAccumulating, turns.StatusProcessing, turns.StatusCommitting} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := setup(t, turns.Config{RecoverInterval: -1, Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
				if err := stageNote(turn, "handled"); err != nil {
					return err
				}
				return turn.Enqueue(refundSpec(turn, 0, 100))
			})})
			session := newSession("web")
			holder := h.startChild("reactor", session, "HOLD_STATE="+string(state))
			h.submit(session, "m-1")
			require.Eventually(t, func() bool { return holder.Logged("holding") }, 30*time.Second, 10*time.Millisecond, holder.Stderr())
			want := []string{"m-1"}
			if state == turns.StatusAccumulating {
				// Messages that arrive while the job is held join the held turn: their own jobs are
				// duplicates of the running one. This is the session that used to wait an hour.
				h.submit(session, "m-2")
				h.submit(session, "m-3")
				want = append(want, "m-2", "m-3")
			}
			records := h.turnsOf(session)
			require.Len(t, records, 1)
			dead := records[0]
			require.Equal(t, state, dead.Status)
			require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn' AND state = 'running'`))
			h.start() // the live reactor

			killed := time.Now()
			holder.Signal(t, syscall.SIGKILL)
			holder.Wait(t, 10*time.Second)
			require.Eventually(t, func() bool {
				return h.count(`SELECT count(*) FROM reckon_reactors WHERE dead_at IS NOT NULL AND taken_over_by = $1`, h.ec.ID()) == 1
			}, testkit.TakeoverBound, 20*time.Millisecond, "the dead reactor's turn job was not taken over within %v", testkit.TakeoverBound)
			t.Logf("taken over %v after SIGKILL", time.Since(killed).Round(time.Millisecond))

			var done *turns.Record
			require.Eventually(t, func() bool {
				for _, r := range h.turnsOf(session) {
					if r.Status == turns.StatusComplete {
						done = r
						return true
					}
				}
				return false
			}, testkit.TakeoverBound+5*time.Second, 20*time.Millisecond, "the session's turn did not complete")
			t.Logf("turn complete %v after SIGKILL", time.Since(killed).Round(time.Millisecond))

			got := h.messageIDs(done.ID)
			slices.Sort(got)
			require.Equal(t, want, got, "one turn handles every message")
			require.Equal(t, dead.Group, done.Group)
			if state != turns.StatusAccumulating { // the dead attempt is superseded by a retry
				require.Equal(t, 2, done.Attempt)
				stored, err := h.tc.Get(ctx, dead.ID)
				require.NoError(t, err)
				require.Equal(t, turns.StatusSuperseded, stored.Status)
			}
			require.Equal(t, 1, h.count(`SELECT count(*) FROM app_notes`))
			require.Eventually(t, func() bool { return h.bank.count(dead.Group.String()+"/d-0/bank.refund/0") == 1 }, 10*time.Second, 10*time.Millisecond)
			testkit.RequireNoRunningJobs(t, h.pool)
			require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turns WHERE session_key = $1 AND status = 'COMPLETE'`, session))
			require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_turns WHERE session_key = $1 AND status IN ('ACCUMULATING', 'PROCESSING', 'COMMITTING')`, session))
		})
	}
}
