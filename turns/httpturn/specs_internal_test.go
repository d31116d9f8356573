package httpturn

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns"
)

// BenchmarkValidateAnswer: checking an answer's effects is linear in their number (one registry
// lookup each), and an answer over MaxEffects is refused by its length: effects=100000 costs less
// than effects=100 (its effects are not walked).
func BenchmarkValidateAnswer(b *testing.B) {
	registry := effects.NewRegistry()
	require.NoError(b, registry.Register(effects.Connector{
		Name: "notes.write", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	}))
	h, err := New(Config{Registry: registry})
	require.NoError(b, err)
	turn := &turns.Turn{}
	for _, n := range []int{100, MaxEffects, 100_000} {
		answer := &Response{Effects: make([]Effect, n)}
		for i := range answer.Effects {
			decision, call := i, 0
			answer.Effects[i] = Effect{Connector: "notes.write", Args: json.RawMessage(`{"n":1}`), Decision: &decision, CallIndex: &call}
		}
		b.Run(fmt.Sprintf("effects=%d", n), func(b *testing.B) {
			for b.Loop() {
				_, _, err := h.specs(turn, answer)
				if (err == nil) != (n <= MaxEffects) {
					b.Fatalf("effects=%d: %v", n, err)
				}
			}
		})
	}
}
