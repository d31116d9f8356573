package turns_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/turns"
)

// scriptedDecider answers the actions in order, records what it was shown, and runs arrive (if
// set) while it "deliberates" on its first call.
type scriptedDecider struct {
	mu      sync.Mutex
	actions []turns.Action
	seen    [][]string
	arrive  func()
}

func (d *scriptedDecider) Decide(_ context.Context, in turns.DecisionInput) (turns.Decision, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for _, m := range in.New {
		ids = append(ids, m.MessageID)
	}
	d.seen = append(d.seen, ids)
	if len(d.seen) == 1 && d.arrive != nil {
		d.arrive()
	}
	action := d.actions[min(len(d.seen), len(d.actions))-1]
	return turns.Decision{Action: action, Reason: "scripted"}, nil
}

func messageIDsOf(ms []turns.Message) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.MessageID
	}
	return ids
}

// A message that arrives while the decider deliberates on ABSORB is not absorbed: it was never
// decided on. It stays pending, so the next BeforeIrreversible asks about it, and the decision
// row lists exactly the absorbed message.
func TestAbsorbTakesOnlyDecidedMessages(t *testing.T) {
	ctx := context.Background()
	var h *harness
	var session string
	decider := &scriptedDecider{actions: []turns.Action{turns.ActionAbsorb, turns.ActionQueue}}
	decider.arrive = func() { h.submit(session, "m3-cancel") }
	var afterAbsorb []string
	var pendingAfterAbsorb bool
	var second turns.Decision
	h = setup(t, turns.Config{
		Decider: decider,
		Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
			if turn.Seq != 1 {
				return nil
			}
			h.submit(session, "m2")
			d, err := turn.BeforeIrreversible(ctx)
			if err != nil {
				return err
			}
			if d.Action != turns.ActionAbsorb {
				return nil
			}
			afterAbsorb = messageIDsOf(turn.Messages())
			if pendingAfterAbsorb, err = turn.HasPendingMessages(ctx); err != nil {
				return err
			}
			second, err = turn.BeforeIrreversible(ctx)
			return err
		}),
	})
	session = newSession("email")
	h.submit(session, "m1")
	res, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, res.Turn.Status)

	require.Equal(t, [][]string{{"m2"}, {"m3-cancel"}}, decider.seen, "the second check is asked about m3")
	require.Equal(t, []string{"m1", "m2"}, afterAbsorb)
	require.True(t, pendingAfterAbsorb, "m3 arrived after the decision: still pending")
	require.Equal(t, turns.ActionQueue, second.Action)
	require.Equal(t, []string{"m1", "m2"}, h.messageIDs(res.Turn.ID))

	decisions, err := h.tc.Decisions(ctx, res.Turn.ID)
	require.NoError(t, err)
	require.Len(t, decisions, 2)
	m2, m3 := messageUUID(t, h, session, "m2"), messageUUID(t, h, session, "m3-cancel")
	require.Equal(t, turns.ActionAbsorb, decisions[0].Action)
	require.Equal(t, []uuid.UUID{m2}, decisions[0].MessageIDs, "the ABSORB row lists exactly what was absorbed")
	require.Equal(t, []uuid.UUID{m3}, decisions[1].MessageIDs)

	// m3 waits in the next turn, which is processed on its own.
	list := h.turnsOf(session)
	require.Len(t, list, 2)
	require.Equal(t, turns.StatusAccumulating, list[1].Status)
	require.Equal(t, []uuid.UUID{m3}, list[1].MessageIDs)
	require.Equal(t, []string{"m3-cancel"}, h.messageIDs(list[1].ID))
	next, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, list[1].ID, next.Turn.ID)
	require.Equal(t, turns.StatusComplete, next.Turn.Status)
}

// A message a QUEUE decision left for the next turn is not swept in by a later ABSORB of another
// message.
func TestAbsorbLeavesQueuedMessages(t *testing.T) {
	ctx := context.Background()
	var h *harness
	var session string
	decider := &scriptedDecider{actions: []turns.Action{turns.ActionQueue, turns.ActionAbsorb}}
	var afterAbsorb []string
	h = setup(t, turns.Config{
		Decider: decider,
		Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
			if turn.Seq != 1 {
				return nil
			}
			h.submit(session, "m2")
			if d, err := turn.BeforeIrreversible(ctx); err != nil || d.Action != turns.ActionQueue {
				return err
			}
			h.submit(session, "m3")
			if d, err := turn.BeforeIrreversible(ctx); err != nil || d.Action != turns.ActionAbsorb {
				return err
			}
			afterAbsorb = messageIDsOf(turn.Messages())
			return nil
		}),
	})
	session = newSession("email")
	h.submit(session, "m1")
	res, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"m2"}, {"m3"}}, decider.seen)
	require.Equal(t, []string{"m1", "m3"}, afterAbsorb)
	require.Equal(t, []string{"m1", "m3"}, h.messageIDs(res.Turn.ID))
	decisions, err := h.tc.Decisions(ctx, res.Turn.ID)
	require.NoError(t, err)
	require.Len(t, decisions, 2)
	require.Equal(t, []uuid.UUID{messageUUID(t, h, session, "m3")}, decisions[1].MessageIDs)
	list := h.turnsOf(session)
	require.Len(t, list, 2)
	require.Equal(t, turns.StatusAccumulating, list[1].Status)
	require.Equal(t, []string{"m2"}, h.messageIDs(list[1].ID), "the QUEUEd message waits for the next turn")
	require.Equal(t, []uuid.UUID{messageUUID(t, h, session, "m2")}, list[1].MessageIDs)
}

func messageUUID(t *testing.T, h *harness, session, messageID string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT id FROM reckon_messages WHERE session_key = $1 AND message_id = $2`, session, messageID).Scan(&id))
	return id
}
