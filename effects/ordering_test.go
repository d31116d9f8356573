package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
)

// orderedUpstream is an in-process upstream for ordering tests. Its connector's args are
// {"key": ordering key, "n": number}; the connector makes the ordering key of "key". It records
// the numbers called per key, in call order (a compensation of n as -n), and whether two calls of
// one key ever ran at once. A call of a held number waits until it is released.
type orderedUpstream struct {
	mu       sync.Mutex
	calls    map[string][]int
	at       map[int]time.Time // when each number was called
	inFlight map[string]int
	overlap  bool
	holds    map[int]chan struct{}
	started  chan int // every call's number, as it starts (buffered)
	fail     map[int]error
}

func newOrderedUpstream() *orderedUpstream {
	return &orderedUpstream{calls: map[string][]int{}, at: map[int]time.Time{}, inFlight: map[string]int{},
		holds: map[int]chan struct{}{}, started: make(chan int, 1000), fail: map[int]error{}}
}

type orderedArgs struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// hold makes the call of n wait until release(n).
func (u *orderedUpstream) hold(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holds[n] = make(chan struct{})
}

func (u *orderedUpstream) release(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	close(u.holds[n])
}

func (u *orderedUpstream) order(key string) []int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]int(nil), u.calls[key]...)
}

func (u *orderedUpstream) call(ctx context.Context, args json.RawMessage, sign int) error {
	var a orderedArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return effects.Permanent(err)
	}
	u.mu.Lock()
	u.inFlight[a.Key]++
	if u.inFlight[a.Key] > 1 && a.Key != "" { // unordered effects may run side by side
		u.overlap = true
	}
	u.calls[a.Key] = append(u.calls[a.Key], sign*a.N)
	u.at[sign*a.N] = time.Now()
	hold, fail := u.holds[a.N], u.fail[a.N]
	u.mu.Unlock()
	u.started <- sign * a.N
	defer func() {
		u.mu.Lock()
		u.inFlight[a.Key]--
		u.mu.Unlock()
	}()
	if hold != nil && sign > 0 {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	time.Sleep(2 * time.Millisecond) // a call takes a while: room for another of the key to overlap
	if sign > 0 && fail != nil {
		return fail
	}
	return nil
}

// connector is the upstream's connector, name: idempotent (or, with unsafe, a write with no way
// to resolve an UNKNOWN outcome but a person), with a Compensate.
func (u *orderedUpstream) connector(name string, unsafe bool) effects.Connector {
	c := effects.Connector{
		Name: name, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Timeout: 10 * time.Second,
		Backoff: testkit.FastBackoff,
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			return json.RawMessage(`{}`), u.call(ctx, call.Args, 1)
		},
		Compensate: func(ctx context.Context, call effects.Call, original effects.Original) (json.RawMessage, error) {
			return json.RawMessage(`{}`), u.call(ctx, original.Args, -1)
		},
		OrderingKey: func(args json.RawMessage) (string, error) {
			var a orderedArgs
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			return a.Key, nil
		},
	}
	if unsafe {
		c.Tags, c.Unsafe, c.Compensate = []effects.Tag{effects.TagWrite}, true, nil
	}
	return c
}

// setupOrdered is setup with the ordered upstream's connectors registered: "ordered.call"
// (idempotent) and "ordered.unsafe".
func setupOrdered(t *testing.T, configure ...func(*effects.Config)) (*harness, *orderedUpstream) {
	t.Helper()
	h := setup(t, configure...)
	u := newOrderedUpstream()
	require.NoError(t, h.registry.Register(u.connector("ordered.call", false)))
	require.NoError(t, h.registry.Register(u.connector("ordered.unsafe", true)))
	return h, u
}

func (h *harness) enqueueOrdered(connector, key string, n int, opts *effects.EnqueueOpts) *effects.Effect {
	h.t.Helper()
	e, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: connector, IdempotencyKey: fmt.Sprintf("%s-%d", key, n), Args: orderedArgs{Key: key, N: n},
	}, opts)
	require.NoError(h.t, err)
	require.Equal(h.t, key, e.OrderingKey)
	return e
}

// waiting reports whether the effect waits for its key's turn: PENDING, no job, lease or queue.
func (h *harness) waiting(id uuid.UUID) bool {
	h.t.Helper()
	return h.count(`SELECT count(*) FROM reckon_effects WHERE id = $1 AND state = 'PENDING'
		AND job_id IS NULL AND lease_token IS NULL AND queue IS NULL AND order_queue IS NOT NULL`, id) == 1
}

func (u *orderedUpstream) awaitStart(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-u.started:
			if got == n {
				return
			}
		case <-timeout:
			t.Fatalf("call %d never started", n)
		}
	}
}

// TestOrderingKeyOneAtATimeInEnqueueOrder: effects enqueued one per transaction and in batches,
// of several keys and none, are all dispatched; each key's in enqueue order and never two at
// once, while the keys and the unordered effects go on side by side.
func TestOrderingKeyOneAtATimeInEnqueueOrder(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t)
	ctx := context.Background()
	var ids []uuid.UUID
	keys := []string{"order-a", "order-b", "order-c"}
	for n := range 12 {
		for _, key := range keys {
			ids = append(ids, h.enqueueOrdered("ordered.call", key, n, nil).ID)
		}
	}
	// A batch: the key's next numbers, in the batch's order, and unordered effects among them.
	var specs []effects.Spec
	for n := 12; n < 18; n++ {
		specs = append(specs, effects.Spec{Connector: "ordered.call", IdempotencyKey: fmt.Sprintf("order-a-%d", n), Args: orderedArgs{Key: "order-a", N: n}},
			effects.Spec{Connector: "ordered.call", IdempotencyKey: fmt.Sprintf("free-%d", n), Args: orderedArgs{N: n}, OrderingKey: ""})
	}
	batch, err := h.client.EnqueueMany(ctx, specs, nil)
	require.NoError(t, err)
	for _, e := range batch {
		ids = append(ids, e.ID)
	}
	require.Equal(t, "", batch[1].OrderingKey, "a connector's ordering key of \"\" leaves the effect unordered")
	h.start()
	for _, id := range ids {
		require.Equal(t, effects.StateConfirmed, h.wait(id).State)
	}
	want := func(from, to int) []int {
		var out []int
		for n := from; n < to; n++ {
			out = append(out, n)
		}
		return out
	}
	require.Equal(t, want(0, 18), u.order("order-a"))
	require.Equal(t, want(0, 12), u.order("order-b"))
	require.Equal(t, want(0, 12), u.order("order-c"))
	require.Len(t, u.order(""), 6)
	require.False(t, u.overlap, "two effects of one key were called at once")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects WHERE ordering_key IS NOT NULL AND order_seq IS NULL`))
}

// TestOrderingKeyHandsOnAtOnce: a settled effect hands its key on at once — a key's effects do not
// wait for the claimers' poll (here 10s) one by one.
func TestOrderingKeyHandsOnAtOnce(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t, func(c *effects.Config) { c.FetchPollInterval = 10 * time.Second })
	var last *effects.Effect
	for n := range 10 {
		last = h.enqueueOrdered("ordered.call", "fast", n, nil)
	}
	started := time.Now()
	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(last.ID).State)
	require.Less(t, time.Since(started), 8*time.Second, "ten effects of one key took a poll interval each")
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, u.order("fast"))
}

// TestOrderingKeyStuckHolds: an effect that is STUCK holds its key's later effects — shown as
// held by it — until an operator resolves it; then they go on, in order.
func TestOrderingKeyStuckHolds(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t)
	ctx := context.Background()
	u.fail[1] = errors.New("connection reset: outcome unknown")
	first := h.enqueueOrdered("ordered.unsafe", "stuck", 1, nil)
	second := h.enqueueOrdered("ordered.unsafe", "stuck", 2, nil)
	third := h.enqueueOrdered("ordered.unsafe", "stuck", 3, nil)
	h.start()
	require.Equal(t, effects.StateStuck, h.wait(first.ID).State)
	// Nothing comes after it while it is STUCK.
	require.Never(t, func() bool { return len(u.order("stuck")) > 1 }, 500*time.Millisecond, 20*time.Millisecond)
	require.True(t, h.waiting(second.ID))
	require.True(t, h.waiting(third.ID))

	_, err := h.client.Resolve(ctx, first.ID, effects.Resolution{To: effects.StateFailed, Actor: "ops", Reason: "never reached the bank"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, h.wait(third.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(second.ID).State)
	require.Equal(t, []int{1, 2, 3}, u.order("stuck"))
}

// TestOrderingKeyCompensationComesFirst: the compensation of an earlier effect takes its
// original's place in the key's order: it is dispatched after the effect in flight and before the
// later ones still waiting.
func TestOrderingKeyCompensationComesFirst(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t)
	ctx := context.Background()
	u.hold(2)
	first := h.enqueueOrdered("ordered.call", "undo", 1, nil)
	second := h.enqueueOrdered("ordered.call", "undo", 2, nil)
	third := h.enqueueOrdered("ordered.call", "undo", 3, nil)
	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(first.ID).State)
	u.awaitStart(t, 2)
	compensation, err := h.client.Compensate(ctx, first.ID, "ops", "refund the first", nil)
	require.NoError(t, err)
	require.Equal(t, "undo", compensation.OrderingKey)
	require.True(t, h.waiting(compensation.ID), "the compensation waits for the effect in flight")
	u.release(2)
	require.Equal(t, effects.StateConfirmed, h.wait(third.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(compensation.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(second.ID).State)
	require.Equal(t, []int{1, 2, -1, 3}, u.order("undo"))
}

// TestOrderingKeyDoDoesNotJumpTheQueue: an inline Do of an ordered effect whose key is busy calls
// nothing and records the effect to wait for its turn; on a free key Do calls at once.
func TestOrderingKeyDoDoesNotJumpTheQueue(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t)
	ctx := context.Background()
	inline, err := h.client.Do(ctx, effects.Spec{Connector: "ordered.call", IdempotencyKey: "do-0", Args: orderedArgs{Key: "do", N: 0}})
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, inline.State, "a free key: called inline")

	u.hold(1)
	first := h.enqueueOrdered("ordered.call", "do", 1, nil)
	h.start()
	u.awaitStart(t, 1)
	second, err := h.client.Do(ctx, effects.Spec{Connector: "ordered.call", IdempotencyKey: "do-2", Args: orderedArgs{Key: "do", N: 2}})
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, second.State)
	require.True(t, h.waiting(second.ID))
	require.Equal(t, []int{0, 1}, u.order("do"))
	u.release(1)
	require.Equal(t, effects.StateConfirmed, h.wait(second.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(first.ID).State)
	require.Equal(t, []int{0, 1, 2}, u.order("do"))
}

// TestOrderingKeyScheduledAt: an ordered effect enqueued with ScheduledAt keeps its place: it is
// dispatched no earlier than then, and the key's later effects wait for it.
func TestOrderingKeyScheduledAt(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t)
	due := time.Now().Add(1500 * time.Millisecond)
	first := h.enqueueOrdered("ordered.call", "later", 1, &effects.EnqueueOpts{ScheduledAt: due})
	second := h.enqueueOrdered("ordered.call", "later", 2, nil)
	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(second.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(first.ID).State)
	require.Equal(t, []int{1, 2}, u.order("later"))
	u.mu.Lock()
	defer u.mu.Unlock()
	require.False(t, u.at[1].Before(due.Add(-50*time.Millisecond)), "called at %v, due %v", u.at[1], due)
}

// TestOrderingKeyRefused: an ordering key too long, or that Postgres cannot store, is refused
// before anything is written; so is args the connector cannot make one of.
func TestOrderingKeyRefused(t *testing.T) {
	t.Parallel()
	h, _ := setupOrdered(t)
	ctx := context.Background()
	for name, spec := range map[string]effects.Spec{
		"too long": {Connector: "ordered.call", IdempotencyKey: "k1", Args: orderedArgs{N: 1}, OrderingKey: strings.Repeat("k", effects.MaxOrderingKeyLen+1)},
		"NUL":      {Connector: "ordered.call", IdempotencyKey: "k2", Args: orderedArgs{N: 1}, OrderingKey: "a\x00b"},
		"args":     {Connector: "ordered.call", IdempotencyKey: "k3", Args: map[string]any{"n": "x"}},
	} {
		_, err := h.client.Enqueue(ctx, spec, nil)
		require.Error(t, err, name)
	}
	_, err := h.client.Enqueue(ctx, effects.Spec{Connector: "ordered.call", IdempotencyKey: "k3", Args: map[string]any{"n": "x"}}, nil)
	require.ErrorIs(t, err, effects.ErrInvalidArgs)
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects`))
}

// TestOrderingKeyRedriveWaitsForItsTurn: a redriven FAILED effect of a key whose turn another
// effect holds waits — not called, no job — until that one settles, and then comes before the
// key's later effects still waiting.
func TestOrderingKeyRedriveWaitsForItsTurn(t *testing.T) {
	t.Parallel()
	h, u := setupOrdered(t)
	ctx := context.Background()
	u.mu.Lock()
	u.fail[1] = effects.Permanent(errors.New("rejected"))
	u.mu.Unlock()
	u.hold(2)
	first := h.enqueueOrdered("ordered.call", "again", 1, nil)
	second := h.enqueueOrdered("ordered.call", "again", 2, nil)
	third := h.enqueueOrdered("ordered.call", "again", 3, nil)
	h.start()
	require.Equal(t, effects.StateFailed, h.wait(first.ID).State)
	u.awaitStart(t, 2) // the key is handed on to the second, which holds it

	u.mu.Lock()
	delete(u.fail, 1)
	u.mu.Unlock()
	redriven, err := h.client.Redrive(ctx, first.ID, "alice", "the upstream is fixed", nil)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, redriven.State)
	require.True(t, h.waiting(first.ID), "a redriven effect waits for its key's turn")
	require.Never(t, func() bool { return len(u.order("again")) > 2 }, 300*time.Millisecond, 20*time.Millisecond)

	u.release(2)
	require.Equal(t, effects.StateConfirmed, h.wait(third.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(first.ID).State)
	require.Equal(t, effects.StateConfirmed, h.wait(second.ID).State)
	require.Equal(t, []int{1, 2, 1, 3}, u.order("again"))
	require.False(t, u.overlap, "two effects of one key were called at once")
}
