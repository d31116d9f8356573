package turns_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/events"
	"github.com/reckonhq/reckon/turns"
)

// A supersede, as the event stream tells it: the session's first turn starts, a message arrives
// while it runs, the decider supersedes it, and the superseding turn starts, reaches its commit
// point and completes with the effect it recorded — each event in the transaction of its change,
// in that order, with the session and the turn it is about.
func TestSupersedeEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPausing()
	p.after = func(ctx context.Context, turn *turns.Turn) error {
		if _, err := turn.BeforeIrreversible(ctx); err != nil {
			return err // ErrSuperseded
		}
		return errors.New("expected a supersede")
	}
	p.later = func(ctx context.Context, turn *turns.Turn) error {
		if err := turn.ReachCommitPoint(ctx); err != nil {
			return err
		}
		return turn.Enqueue(refundSpec(turn, 0, 100))
	}
	h := setup(t, turns.Config{Handler: p})
	session := newSession("web")
	first := runSupersededTurn(t, h, p, session)
	second, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, second.Turn.Status)

	log := events.New(h.pool, nil)
	var got []string
	var after events.ID
	for {
		evs, next, held, err := log.Read(ctx, events.Filter{Patterns: []string{"turn.*", "session.*", "supersede.*", "commit.*", "tool.*"}}, after, 100)
		require.NoError(t, err)
		for _, ev := range evs {
			require.Equal(t, session, ev.SessionKey, ev.Type)
			require.Equal(t, "acme", ev.Tenant, ev.Type)
			turn := "first"
			if *ev.TurnID == second.Turn.ID {
				turn = "second"
			} else {
				require.Equal(t, first.Turn.ID, *ev.TurnID, ev.Type)
			}
			got = append(got, turn+":"+ev.Type)
		}
		if len(evs) == 0 && !held {
			break
		}
		after = next
	}
	require.Equal(t, []string{
		"first:session.created",
		"first:turn.started",
		"first:supersede.requested",
		"first:supersede.decision",
		"first:turn.superseded", "first:supersede.executed",
		"second:turn.started",
		"second:commit.reached",
		"second:tool.authorized",
		"second:turn.completed",
	}, got)
}
