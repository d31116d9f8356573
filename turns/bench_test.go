package turns_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/turns"
)

// BenchmarkMutex measures an uncontended acquire and release of a session mutex.
func BenchmarkMutex(b *testing.B) {
	ctx := context.Background()
	mutex := turns.NewMutex(pgtest.NewDB(b))
	session := newSession("web")
	for b.Loop() {
		lock, err := mutex.Acquire(ctx, session, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTurn measures a whole turn: submit a message, run its turn with one staged effect, and
// commit.
func BenchmarkTurn(b *testing.B) {
	ctx := context.Background()
	h := setup(b, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		return turn.Enqueue(refundSpec(turn, 0, 1))
	})})
	session := newSession("web")
	i := 0
	for b.Loop() {
		i++
		if _, err := h.tc.Submit(ctx, turns.Inbound{SessionKey: session, MessageID: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
		if _, err := h.tc.RunTurn(ctx, session); err != nil {
			b.Fatal(err)
		}
	}
}
