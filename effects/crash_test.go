package effects_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// startChild starts a reactor process (this test binary in child mode) on the harness's database
// and bank, with env added to its environment, and returns once it runs.
func (h *harness) startChild(env ...string) *proctest.Process {
	h.t.Helper()
	return testkit.StartReactorChild(h.t, childReactorEnv, h.pool, h.bank.URL(), env...)
}

// TestCrashWindows kills a real reactor process with SIGKILL in each crash window of the
// dispatch protocol (docs/design.md); a new reactor then resolves the effect, and the non-idempotent bank never holds a
// wire that was performed twice.
func TestCrashWindows(t *testing.T) {
	t.Parallel()
	for _, window := range []struct {
		name      string
		arm       func(b *fakebank.Bank, key string) <-chan string
		performed int // wires the dead reactor left behind
		path      []string
	}{
		{
			name:      "before the call",
			arm:       func(b *fakebank.Bank, _ string) <-chan string { return b.Arm("before-call") },
			performed: 0,
			path:      []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"},
		},
		{
			name:      "during the call, after the upstream performed",
			arm:       (*fakebank.Bank).HangAfterPerforming,
			performed: 1,
			path:      []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"},
		},
		{
			name:      "after the call, before recording",
			arm:       func(b *fakebank.Bank, _ string) <-chan string { return b.Arm("after-call") },
			performed: 1,
			path:      []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"},
		},
	} {
		t.Run(window.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
			key := fmt.Sprintf("crash-%d", time.Now().UnixNano())
			reached := window.arm(h.bank, key)

			first := h.startChild()
			effect := h.enqueue("bank.wire", key, 500)
			select {
			case got := <-reached:
				require.Equal(t, key, got)
			case <-time.After(30 * time.Second):
				t.Fatalf("the reactor never reached the crash point\n%s", first.Stderr())
			}
			first.Signal(t, syscall.SIGKILL)
			first.Wait(t, 10*time.Second)
			require.Equal(t, window.performed, h.bank.Count(key))
			stored, err := h.client.Get(context.Background(), effect.ID)
			require.NoError(t, err)
			require.Equal(t, effects.StatePending, stored.State, "the dead reactor recorded nothing")

			second := h.startChild()
			done := h.wait(effect.ID)
			require.Equal(t, effects.StateConfirmed, done.State, second.Stderr())
			require.Equal(t, window.path, h.path(effect.ID))
			require.Equal(t, 1, h.bank.Count(key), "performed exactly once")
			require.Equal(t, int64(500), h.bank.Net(key))

			second.Signal(t, syscall.SIGTERM)
			require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
		})
	}
}
