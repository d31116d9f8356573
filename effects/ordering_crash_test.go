package effects_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// enqueueWire enqueues a wire of the bank connector with the idempotency key key, ordered by
// orderingKey.
func (h *harness) enqueueWire(key, orderingKey string) *effects.Effect {
	h.t.Helper()
	e, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: "bank.wire", IdempotencyKey: key, OrderingKey: orderingKey,
		Args: map[string]any{"account": "acct-1", "amount": 100},
	}, nil)
	require.NoError(h.t, err)
	return e
}

// requireLedgerOrder: the bank performed each of keys exactly once, in this order.
func (h *harness) requireLedgerOrder(keys ...string) {
	h.t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
		require.Equal(h.t, 1, h.bank.Count(k), "wire %s performed once", k)
	}
	var got []string
	for _, entry := range h.bank.Ledger() {
		if want[entry.Key] {
			got = append(got, entry.Key)
		}
	}
	require.Equal(h.t, keys, got, "the bank's ledger is in the key's order")
}

// TestOrderingCrashWindows kills a real reactor process with SIGKILL in each window that ordering
// keys add (docs/design.md, "Ordering keys"): the effect after the killed one is never called
// before that one is settled, and a new reactor finishes both, in order, each performed once.
func TestOrderingCrashWindows(t *testing.T) {
	t.Parallel()
	for _, window := range []struct {
		name string
		arm  func(b *fakebank.Bank, key string) <-chan string
	}{
		{
			name: "the head during its call, after the upstream performed",
			arm:  (*fakebank.Bank).HangAfterPerforming,
		},
		{
			name: "the head after its call, before its outcome is recorded",
			arm:  func(b *fakebank.Bank, key string) <-chan string { return b.ArmKey("after-call", key) },
		},
		{
			name: "the head before its call",
			arm:  func(b *fakebank.Bank, key string) <-chan string { return b.ArmKey("before-call", key) },
		},
	} {
		t.Run(window.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
			stamp := time.Now().UnixNano()
			head, next := fmt.Sprintf("head-%d", stamp), fmt.Sprintf("next-%d", stamp)
			reached := window.arm(h.bank, head)
			first := h.startChild()
			headEffect := h.enqueueWire(head, "order-1")
			nextEffect := h.enqueueWire(next, "order-1")
			select {
			case <-reached:
			case <-time.After(30 * time.Second):
				t.Fatalf("the window was never reached\n%s", first.Stderr())
			}
			require.True(t, h.waiting(nextEffect.ID), "the next effect waits while the head is in flight")
			first.Signal(t, syscall.SIGKILL)
			first.Wait(t, 10*time.Second)
			require.True(t, h.waiting(nextEffect.ID), "the next effect waits for the dead reactor's head")
			require.Equal(t, 0, h.bank.Count(next))

			second := h.startChild()
			require.Equal(t, effects.StateConfirmed, h.wait(headEffect.ID).State, second.Stderr())
			require.Equal(t, effects.StateConfirmed, h.wait(nextEffect.ID).State, second.Stderr())
			h.requireLedgerOrder(head, next)
			// The next effect's turn came after the head was settled: its claim stamped it later.
			require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effect_transitions a, reckon_effect_transitions b
				WHERE a.effect_id = $1 AND a.to_state = 'CONFIRMED' AND b.effect_id = $2 AND b.to_state = 'CONFIRMED'
				  AND a.at < b.at`, headEffect.ID, nextEffect.ID))
			second.Signal(t, syscall.SIGTERM)
			require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
		})
	}

	t.Run("the next effect handed on and claimed, before a fetch", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
		ctx := context.Background()
		stamp := time.Now().UnixNano()
		head, next := fmt.Sprintf("head-%d", stamp), fmt.Sprintf("next-%d", stamp)
		first := h.startChild("CHILD_FETCH_PAUSE=10m") // it claims, but fetches nothing more
		headEffect := h.enqueueWire(head, "order-2")
		nextEffect := h.enqueueWire(next, "order-2")
		claimed := func(id any) bool {
			return h.count(`SELECT count(*) FROM reckon_effects e JOIN river_job j ON j.id = e.job_id
				WHERE e.id = $1 AND j.state = 'available'`, id) == 1
		}
		require.Eventually(t, func() bool { return claimed(headEffect.ID) }, 30*time.Second, 10*time.Millisecond, first.Stderr())
		require.True(t, h.waiting(nextEffect.ID))
		// An operator cancels the head (never attempted): the cancellation hands the key on, and
		// the reactor claims the next effect.
		_, err := h.client.Cancel(ctx, headEffect.ID, "ops", "not needed", nil)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return claimed(nextEffect.ID) }, 30*time.Second, 10*time.Millisecond, first.Stderr())
		first.Signal(t, syscall.SIGKILL)
		first.Wait(t, 10*time.Second)
		require.Equal(t, 0, h.bank.Count(next))

		second := h.startChild()
		require.Equal(t, effects.StateConfirmed, h.wait(nextEffect.ID).State, second.Stderr())
		require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(nextEffect.ID))
		require.Equal(t, 0, h.bank.Count(head))
		require.Equal(t, 1, h.bank.Count(next))
		second.Signal(t, syscall.SIGTERM)
		require.Equal(t, 0, second.Wait(t, 15*time.Second), second.Stderr())
	})
}

// TestOrderingAcrossReactors: two reactor processes share one key's effects; one is killed in
// the middle. The bank performs every wire once, in the key's order.
func TestOrderingAcrossReactors(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true, Timeout: time.Second})
	stamp := time.Now().UnixNano()
	a, b := h.startChild("CHILD_REACTOR_ID=order-a"), h.startChild("CHILD_REACTOR_ID=order-b")
	var keys []string
	var enqueued []*effects.Effect
	for n := range 30 {
		key := fmt.Sprintf("across-%d-%02d", stamp, n)
		keys = append(keys, key)
		enqueued = append(enqueued, h.enqueueWire(key, "across"))
	}
	require.Eventually(t, func() bool { return h.bank.Count(keys[10]) == 1 }, 60*time.Second, 10*time.Millisecond, a.Stderr()+b.Stderr())
	a.Signal(t, syscall.SIGKILL)
	a.Wait(t, 10*time.Second)
	for _, e := range enqueued {
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State, b.Stderr())
	}
	h.requireLedgerOrder(keys...)
	b.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, b.Wait(t, 15*time.Second), b.Stderr())
}
