package reckontest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/reckonhq/reckon/effects"
)

// RequireState fails the test unless the effect id is in state want now, and returns it. The
// failure names the state it is in, its attempts, its last error and its path (Path). It does not
// wait: settle the effect first (Drain, or client.Wait).
func RequireState(tb testing.TB, client *effects.Client, id uuid.UUID, want effects.State) *effects.Effect {
	tb.Helper()
	effect, err := client.Get(context.Background(), id)
	if err != nil {
		tb.Fatalf("reckontest: effect %s: %v", id, err)
	}
	if effect.State != want {
		tb.Fatalf("reckontest: effect %s (%s, key %q) is %s, want %s; attempts %d, error %q, path %s",
			id, effect.Connector, effect.IdempotencyKey, effect.State, want, effect.Attempts, effect.Error,
			strings.Join(Path(tb, client, id), " "))
	}
	return effect
}

// Path returns the effect's audit trail (reckon_effect_transitions, through client.History) as
// "FROM>TO" steps in order, the insert as ">PENDING": an effect whose response was lost and which
// its status check confirmed has the path ">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED".
// Observations (a row from a state to itself, such as the late outcome of an attempt fenced out)
// are left out. An effect that cannot be read fails the test.
func Path(tb testing.TB, client *effects.Client, id uuid.UUID) []string {
	tb.Helper()
	history, err := client.History(context.Background(), id)
	if err != nil {
		tb.Fatalf("reckontest: history of effect %s: %v", id, err)
	}
	var steps []string
	for _, tr := range history {
		if tr.From == tr.To {
			continue
		}
		steps = append(steps, fmt.Sprintf("%s>%s", tr.From, tr.To))
	}
	return steps
}

// RequirePath fails the test unless the effect's Path is exactly want:
//
//	reckontest.RequirePath(t, client, effect.ID, ">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED")
func RequirePath(tb testing.TB, client *effects.Client, id uuid.UUID, want ...string) {
	tb.Helper()
	if got := Path(tb, client, id); !slices.Equal(got, want) {
		tb.Fatalf("reckontest: effect %s went %s, want %s", id, strings.Join(got, " "), strings.Join(want, " "))
	}
}
