package effects_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// atOnce runs fn n times at once and returns the effects it returned, failing on any error.
func atOnce(t *testing.T, n int, fn func() (*effects.Effect, error)) []*effects.Effect {
	t.Helper()
	out := make([]*effects.Effect, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = fn()
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return out
}

// requireOneEffect checks that the calls all returned one effect, of which exactly one call
// recorded it and the others were deduplicated.
func requireOneEffect(t *testing.T, got []*effects.Effect) {
	t.Helper()
	fresh := 0
	for _, e := range got {
		require.Equal(t, got[0].ID, e.ID, "one effect per key")
		if !e.Deduplicated {
			fresh++
		}
	}
	require.LessOrEqual(t, fresh, 1, "at most one call recorded the effect")
}

func wire(amount int) map[string]any { return map[string]any{"account": "acct-1", "amount": amount} }

// TestDeduplicatedEnqueueRecordsNothing: on every path that inserts an effect — enqueue left for
// the claimers, enqueue with its dispatch job, a batch, Do, a compensation, an effect held for a
// person's confirmation — the same key enqueued again, one call after the other and many at once,
// leaves exactly one effect with one history row and one event for its insert, and no history or
// event about an effect that does not exist.
func TestDeduplicatedEnqueueRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := func(key string) effects.Spec {
		return effects.Spec{Connector: "bank.wire", IdempotencyKey: key, Args: wire(5)}
	}
	twiceThenAtOnce := func(t *testing.T, key string, enqueue func(key string) (*effects.Effect, error)) {
		t.Helper()
		var got []*effects.Effect
		for range 2 {
			e, err := enqueue(key)
			require.NoError(t, err)
			got = append(got, e)
		}
		require.False(t, got[0].Deduplicated)
		require.True(t, got[1].Deduplicated)
		requireOneEffect(t, append(got, atOnce(t, 6, func() (*effects.Effect, error) { return enqueue(key) })...))
		requireOneEffect(t, atOnce(t, 6, func() (*effects.Effect, error) { return enqueue(key + "/new") }))
	}

	for _, tc := range []struct {
		name    string
		effects int // effects in the database at the end
		run     func(t *testing.T, h *harness)
	}{
		{"claimed", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "claim-1", func(key string) (*effects.Effect, error) { return h.client.Enqueue(ctx, spec(key), nil) })
		}},
		{"with its job", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "job-1", func(key string) (*effects.Effect, error) {
				return h.client.Enqueue(ctx, spec(key), &effects.EnqueueOpts{ScheduledAt: time.Now()})
			})
		}},
		{"held for confirmation", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "held-1", func(key string) (*effects.Effect, error) {
				s := spec(key)
				s.RequireConfirmation = true
				return h.client.Enqueue(ctx, s, nil)
			})
		}},
		{"batch", 3, func(t *testing.T, h *harness) {
			many := func() ([]*effects.Effect, error) {
				return h.client.EnqueueMany(ctx, []effects.Spec{spec("batch-1"), spec("batch-2"), spec("batch-1")}, nil)
			}
			first, err := many()
			require.NoError(t, err)
			require.False(t, first[0].Deduplicated)
			require.Equal(t, first[0].ID, first[2].ID, "one effect per key, within a batch too")
			second, err := many()
			require.NoError(t, err)
			require.True(t, second[0].Deduplicated && second[1].Deduplicated)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					_, err := h.client.EnqueueMany(ctx, []effects.Spec{spec("batch-3"), spec("batch-1")}, nil)
					require.NoError(t, err)
				})
			}
			wg.Wait()
		}},
		{"Do", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "do-1", func(key string) (*effects.Effect, error) { return h.client.Do(ctx, spec(key)) })
		}},
		{"compensation", 3, func(t *testing.T, h *harness) {
			original, err := h.client.Do(ctx, spec("undo-me"))
			require.NoError(t, err)
			require.Equal(t, effects.StateConfirmed, original.State)
			twiceThenAtOnce(t, "1", func(suffix string) (*effects.Effect, error) {
				return h.client.Compensate(ctx, original.ID, "test", "undo", &effects.CompensateOpts{KeySuffix: suffix})
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true})
			tc.run(t, h)
			require.Equal(t, tc.effects, testkit.RequireRecordedOnce(t, h.pool))
		})
	}
}
