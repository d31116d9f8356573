package turns_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns"
)

// The default decision is the conservative table of DefaultDecision.
func TestDefaultDecision(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		commitPoint bool
		sideEffects int
		pending     int // irreversible effects pending, or awaiting a confirmation
		action      turns.Action
		reason      string
	}{
		{"nothing done yet", false, 0, 0, turns.ActionSupersede, "new_messages_before_commit_point"},
		{"side effects executed", false, 2, 0, turns.ActionQueue, "side_effects_executed"},
		{"commit point reached", true, 0, 0, turns.ActionQueue, "commit_point_reached"},
		{"both", true, 1, 0, turns.ActionQueue, "commit_point_reached"},
		{"irreversible effect pending", false, 0, 1, turns.ActionQueue, "irreversible_effects_pending"},
		{"pending and side effects", false, 1, 3, turns.ActionQueue, "side_effects_executed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			decision := turns.DefaultDecision(turns.DecisionInput{PendingIrreversible: tc.pending,
				Turn: turns.Record{CommitPointReached: tc.commitPoint, SideEffectsExecuted: tc.sideEffects}})
			require.Equal(t, tc.action, decision.Action)
			require.Equal(t, tc.reason, decision.Reason)
			require.Equal(t, tc.action != turns.ActionSupersede, decision.Proceed())
		})
	}
}

// pausing is a handler whose first turn runs before, pauses at a point until the test let it go
// on, and then runs after. Later turns run later.
type pausing struct {
	paused, resume chan struct{}
	turns          atomic.Int32
	before, after  func(ctx context.Context, turn *turns.Turn) error
	later          func(ctx context.Context, turn *turns.Turn) error
}

func newPausing() *pausing { return &pausing{paused: make(chan struct{}), resume: make(chan struct{})} }

func (p *pausing) HandleTurn(ctx context.Context, turn *turns.Turn) error {
	if p.turns.Add(1) > 1 {
		return p.later(ctx, turn)
	}
	if p.before != nil {
		if err := p.before(ctx, turn); err != nil {
			return err
		}
	}
	close(p.paused)
	<-p.resume
	return p.after(ctx, turn)
}

// runFirstTurn submits m1, runs its turn up to the pause, submits m2 while it is paused, and lets
// it go on; it returns the first run's result.
func runFirstTurn(t *testing.T, h *harness, p *pausing, session string) (*turns.Result, error) {
	t.Helper()
	h.submit(session, "m1")
	type outcome struct {
		result *turns.Result
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		result, err := h.tc.RunTurn(context.Background(), session)
		done <- outcome{result, err}
	}()
	<-p.paused
	h.submit(session, "m2")
	close(p.resume)
	o := <-done
	return o.result, o.err
}

// runSupersededTurn is runFirstTurn for a first turn that the decider supersedes: it requires the
// turn to end SUPERSEDED.
func runSupersededTurn(t *testing.T, h *harness, p *pausing, session string) *turns.Result {
	t.Helper()
	first, err := runFirstTurn(t, h, p, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusSuperseded, first.Turn.Status)
	return first
}

// A message that arrives before an irreversible effect makes the turn ask the default decider;
// with nothing done yet it supersedes: nothing is committed, and the next turn takes both
// messages in the same turn group. The decision is recorded and counted.
func TestSupersedeBeforeIrreversibleEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPausing()
	var decisionSeen turns.Decision
	p.after = func(ctx context.Context, turn *turns.Turn) error {
		pending, err := turn.HasPendingMessages(ctx)
		if err != nil || !pending {
			return errors.New("expected a pending message")
		}
		decisionSeen, err = turn.BeforeIrreversible(ctx)
		if err != nil {
			return err // ErrSuperseded
		}
		return turn.Enqueue(refundSpec(turn, 0, 100))
	}
	var secondMessages []string
	p.later = func(ctx context.Context, turn *turns.Turn) error {
		for _, m := range turn.Messages() {
			secondMessages = append(secondMessages, m.MessageID)
		}
		decision, err := turn.BeforeIrreversible(ctx)
		if err != nil || decision.Action != "" {
			return errors.New("nothing new to decide on")
		}
		return turn.Enqueue(refundSpec(turn, 0, 100))
	}
	h := setup(t, turns.Config{Handler: p})
	session := newSession("web")

	first := runSupersededTurn(t, h, p, session)
	require.Equal(t, turns.ActionSupersede, decisionSeen.Action)
	require.Len(t, decisionSeen.Messages, 1)
	require.Equal(t, "m2", decisionSeen.Messages[0].MessageID)
	require.Empty(t, first.Effects)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))

	decisions, err := h.tc.Decisions(ctx, first.Turn.ID)
	require.NoError(t, err)
	require.Len(t, decisions, 1)
	require.Equal(t, turns.ActionSupersede, decisions[0].Action)
	require.Equal(t, "default", decisions[0].Decider)
	require.Equal(t, "new_messages_before_commit_point", decisions[0].Reason)
	require.Equal(t, []string{"m2"}, idsOf(t, h, decisions[0].MessageIDs))
	require.Equal(t, 1.0, h.metric("reckon_turn_decisions_total", map[string]string{"action": "SUPERSEDE", "decider": "default"}))

	second, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, second.Turn.Status)
	require.Equal(t, first.Turn.Group, second.Turn.Group, "the superseding turn inherits the turn group")
	require.Equal(t, []string{"m1", "m2"}, secondMessages)
	stored, err := h.tc.Get(ctx, first.Turn.ID)
	require.NoError(t, err)
	require.Equal(t, second.Turn.ID, *stored.SupersededBy)
	require.Len(t, second.Effects, 1)
	require.False(t, second.Effects[0].Deduplicated)
}

// An effect of the turn that awaits a person's confirmation counts as a pending irreversible effect,
// whatever its connector's policy: the decider is shown it, and the default decider QUEUEs rather
// than supersede a turn whose effect may be confirmed, and performed, at any moment. An effect of
// another turn, or one settled, does not count.
func TestSupersedeDecisionCountsAHeldEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		held    bool
		pending int
		action  turns.Action
		reason  string
		status  turns.Status
	}{
		{"held", true, 1, turns.ActionQueue, "irreversible_effects_pending", turns.StatusComplete},
		{"not held", false, 0, turns.ActionSupersede, "new_messages_before_commit_point", turns.StatusSuperseded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPausing()
			var h *harness
			var shown turns.DecisionInput
			p.before = func(ctx context.Context, turn *turns.Turn) error {
				// Recorded at once, outside the turn's commit: an idempotent effect, held or not, and a
				// held one of another turn.
				note := func(key string, turnID uuid.UUID, held bool) error {
					_, err := h.ec.Enqueue(ctx, effects.Spec{Connector: "notes.write", IdempotencyKey: key, TurnID: &turnID,
						RequireConfirmation: held, Args: map[string]int{"n": 1}}, nil)
					return err
				}
				if err := note(turn.ID.String()+"/note", turn.ID, tc.held); err != nil {
					return err
				}
				return note(turn.ID.String()+"/elsewhere", uuid.New(), true)
			}
			p.after = func(ctx context.Context, turn *turns.Turn) error {
				_, err := turn.BeforeIrreversible(ctx)
				return err
			}
			h = setup(t, turns.Config{Handler: p, Decider: turns.DeciderFunc(func(_ context.Context, in turns.DecisionInput) (turns.Decision, error) {
				shown = in
				return turns.DefaultDecision(in), nil
			})})
			require.NoError(t, h.ec.Registry().Register(effects.Connector{
				Name: "notes.write", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
				Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
			}))

			first, err := runFirstTurn(t, h, p, newSession("web"))
			require.NoError(t, err)
			require.Equal(t, tc.status, first.Turn.Status)
			require.Equal(t, tc.pending, shown.PendingIrreversible)
			decisions, err := h.tc.Decisions(ctx, first.Turn.ID)
			require.NoError(t, err)
			require.Len(t, decisions, 1)
			require.Equal(t, tc.action, decisions[0].Action)
			require.Equal(t, tc.reason, decisions[0].Reason)
		})
	}
}

// With an application decider that supersedes even after an inline irreversible effect, the
// superseding turn shares the turn group, and doing or enqueueing the same journal position in it
// finds the effect instead of performing it again.
func TestSupersedingTurnDeduplicatesJournalPosition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPausing()
	var key string
	p.before = func(ctx context.Context, turn *turns.Turn) error {
		effect, err := turn.Do(ctx, refundSpec(turn, 0, 100)) // performed now, before the pause
		if err != nil {
			return err
		}
		key = effect.IdempotencyKey
		return nil
	}
	p.after = func(ctx context.Context, turn *turns.Turn) error {
		_, err := turn.BeforeIrreversible(ctx)
		return err
	}
	var redo atomic.Bool
	p.later = func(ctx context.Context, turn *turns.Turn) error {
		effect, err := turn.Do(ctx, refundSpec(turn, 0, 100))
		if err != nil {
			return err
		}
		redo.Store(effect.Deduplicated)
		return turn.Enqueue(refundSpec(turn, 0, 100))
	}
	var asked atomic.Int32
	h := setup(t, turns.Config{Handler: p, Decider: turns.DeciderFunc(func(_ context.Context, in turns.DecisionInput) (turns.Decision, error) {
		asked.Add(1)
		if in.Turn.SideEffectsExecuted != 1 || !in.Turn.CommitPointReached {
			return turns.Decision{}, errors.New("the decider sees the executed irreversible effect")
		}
		return turns.Decision{Action: turns.ActionSupersede, Reason: "user changed their mind"}, nil
	})})
	session := newSession("web")

	first := runSupersededTurn(t, h, p, session)
	require.Equal(t, int32(1), asked.Load())
	require.Equal(t, first.Turn.Group.String()+"/d-0/bank.refund/0", key)
	require.Equal(t, 1, h.bank.count(key))

	second, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, first.Turn.Group, second.Turn.Group)
	require.True(t, redo.Load(), "Do at the same position found the effect")
	require.Len(t, second.Effects, 1)
	require.True(t, second.Effects[0].Deduplicated, "enqueueing the same position deduplicated")
	require.Equal(t, key, second.Effects[0].IdempotencyKey)
	require.Equal(t, 1, h.bank.count(key), "performed once")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 1.0, h.metric("reckon_turn_decisions_total", map[string]string{"action": "SUPERSEDE", "decider": "application"}))
}

// After an inline irreversible effect (a commit point) the default decider queues: the turn completes, and the new message
// forms the next turn in a new turn group.
func TestQueueAfterSideEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPausing()
	p.before = func(ctx context.Context, turn *turns.Turn) error {
		_, err := turn.Do(ctx, refundSpec(turn, 0, 100))
		return err
	}
	var decision turns.Decision
	p.after = func(ctx context.Context, turn *turns.Turn) error {
		var err error
		decision, err = turn.BeforeIrreversible(ctx)
		if err != nil {
			return err
		}
		again, err := turn.BeforeIrreversible(ctx)
		if err != nil || again.Action != "" {
			return errors.New("a queued message is not decided on twice")
		}
		return nil
	}
	p.later = func(ctx context.Context, turn *turns.Turn) error { return nil }
	h := setup(t, turns.Config{Handler: p})
	session := newSession("web")

	first, err := runFirstTurn(t, h, p, session)
	require.NoError(t, err)
	require.Equal(t, turns.ActionQueue, decision.Action)
	require.Equal(t, "commit_point_reached", decision.Reason, "an irreversible effect is a commit point")
	require.Equal(t, turns.StatusComplete, first.Turn.Status)
	require.Equal(t, []string{"m1"}, h.messageIDs(first.Turn.ID))

	second, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, []string{"m2"}, h.messageIDs(second.Turn.ID))
	require.NotEqual(t, first.Turn.Group, second.Turn.Group, "a queued message starts a new turn group")
	require.Equal(t, 1.0, h.metric("reckon_turn_decisions_total", map[string]string{"action": "QUEUE", "decider": "default"}))
}

// ABSORB brings the new message into the running turn; FORCE_COMPLETE finishes without asking
// again.
func TestAbsorbAndForceComplete(t *testing.T) {
	t.Parallel()
	for _, action := range []turns.Action{turns.ActionAbsorb, turns.ActionForceComplete} {
		t.Run(string(action), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := newPausing()
			var seen []string
			p.after = func(ctx context.Context, turn *turns.Turn) error {
				if _, err := turn.BeforeIrreversible(ctx); err != nil {
					return err
				}
				for _, m := range turn.Messages() {
					seen = append(seen, m.MessageID)
				}
				again, err := turn.BeforeIrreversible(ctx)
				if err != nil {
					return err
				}
				if action == turns.ActionForceComplete && again.Action != turns.ActionForceComplete {
					return errors.New("force complete holds for the rest of the turn")
				}
				return nil
			}
			p.later = func(ctx context.Context, turn *turns.Turn) error { return nil }
			var asked atomic.Int32
			h := setup(t, turns.Config{Handler: p, Decider: turns.DeciderFunc(func(context.Context, turns.DecisionInput) (turns.Decision, error) {
				asked.Add(1)
				return turns.Decision{Action: action}, nil
			})})
			session := newSession("web")
			first, err := runFirstTurn(t, h, p, session)
			require.NoError(t, err)
			require.Equal(t, turns.StatusComplete, first.Turn.Status)
			require.Equal(t, int32(1), asked.Load())
			_, err = h.tc.RunTurn(ctx, session)
			if action == turns.ActionAbsorb {
				require.Equal(t, []string{"m1", "m2"}, seen)
				require.Equal(t, []string{"m1", "m2"}, h.messageIDs(first.Turn.ID))
				require.Len(t, first.Turn.MessageIDs, 2)
				require.ErrorIs(t, err, turns.ErrNoTurn, "the absorbed message is not processed again")
			} else {
				require.Equal(t, []string{"m1"}, seen)
				require.NoError(t, err, "the new message forms the next turn")
			}
		})
	}
}

// A decider's unknown action fails the handler's call and changes nothing.
func TestDeciderUnknownAction(t *testing.T) {
	t.Parallel()
	p := newPausing()
	p.after = func(ctx context.Context, turn *turns.Turn) error {
		_, err := turn.BeforeIrreversible(ctx)
		return err
	}
	h := setup(t, turns.Config{Handler: p, Decider: turns.DeciderFunc(func(context.Context, turns.DecisionInput) (turns.Decision, error) {
		return turns.Decision{Action: "MAYBE"}, nil
	})})
	_, err := runFirstTurn(t, h, p, newSession("web"))
	require.ErrorContains(t, err, `unknown action "MAYBE"`)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_turn_decisions`))
}

func idsOf(t *testing.T, h *harness, inboxIDs any) []string {
	t.Helper()
	var ids []string
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT array_agg(message_id ORDER BY received_at) FROM reckon_messages WHERE id = ANY($1)`, inboxIDs).Scan(&ids))
	return ids
}

// End to end on a started reactor: the aggregation job runs the first turn, a message arriving
// before its irreversible effect supersedes it, and the job of the next turn processes both
// messages in the same turn group and enqueues the refund once.
func TestSupersedeThroughReactor(t *testing.T) {
	t.Parallel()
	p := newPausing()
	p.after = func(ctx context.Context, turn *turns.Turn) error {
		if _, err := turn.BeforeIrreversible(ctx); err != nil {
			return err
		}
		return turn.Enqueue(refundSpec(turn, 0, 100))
	}
	later := make(chan []turns.Message, 1)
	p.later = func(ctx context.Context, turn *turns.Turn) error {
		later <- turn.Messages()
		if _, err := turn.BeforeIrreversible(ctx); err != nil {
			return err
		}
		return turn.Enqueue(refundSpec(turn, 0, 100))
	}
	h := setup(t, turns.Config{Handler: p, Policies: map[string]turns.ChannelPolicy{"chat": {Mode: turns.AggregationFixed, Window: 100 * time.Millisecond}}})
	h.start()
	session := newSession("chat")
	h.submit(session, "m1")
	<-p.paused
	h.submit(session, "m2")
	close(p.resume)
	select {
	case messages := <-later:
		require.Len(t, messages, 2)
		require.Equal(t, "m1", messages[0].MessageID)
		require.Equal(t, "m2", messages[1].MessageID)
	case <-time.After(30 * time.Second):
		t.Fatal("the superseding turn never ran")
	}
	records := h.awaitTurns(session, 2)
	require.Equal(t, turns.StatusSuperseded, records[0].Status)
	require.Equal(t, records[0].Group, records[1].Group)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE turn_group = $1`, records[0].Group.String()))
	require.Eventually(t, func() bool { return h.bank.count(records[0].Group.String()+"/d-0/bank.refund/0") == 1 },
		30*time.Second, 10*time.Millisecond, "the reactor performed the refund once")
}
