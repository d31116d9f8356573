package retention_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/retention"
)

// A turn group goes whole, with its messages and decisions, once every turn of it finished
// (COMPLETE, SUPERSEDED, FAILED) before the cutoff, and its effects go with it in the same run. A
// group with an unfinished or recently finished turn stays whole, with its effects, and so does a
// group whose turn superseded a turn of another group (superseded_by refers to it).
func TestTurnGroups(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day

	done := uuid.New()
	doneLast := h.turn(turn{group: done, status: "COMPLETE", age: old})
	doneFirst := h.turn(turn{group: done, status: "SUPERSEDED", age: 41 * day, supersededBy: &doneLast})
	failed := uuid.New()
	h.turn(turn{group: failed, status: "FAILED", age: 50 * day})
	doneEffect := h.effect(effect{settled: old, turnGroup: done.String()})

	accumulating := uuid.New()
	h.turn(turn{group: accumulating, status: "COMPLETE", age: old})
	h.turn(turn{group: accumulating, status: "ACCUMULATING", age: old})
	accumulatingEffect := h.effect(effect{settled: old, turnGroup: accumulating.String()})
	processing := uuid.New()
	h.turn(turn{group: processing, status: "PROCESSING", age: old})

	recentlyDone := uuid.New()
	h.turn(turn{group: recentlyDone, status: "COMPLETE", age: old, completed: ptr(29 * day)})

	superseded := uuid.New()
	target := h.turn(turn{group: superseded, status: "COMPLETE", age: old})
	otherGroup := uuid.New()
	h.turn(turn{group: otherGroup, status: "SUPERSEDED", age: day, supersededBy: &target})

	for _, group := range []uuid.UUID{done, accumulating} {
		h.exec(`INSERT INTO reckon_turn_artifacts (turn_group, name, data, input_fingerprint, policy, turn_id, tenant_id, session_key)
			VALUES ($1, 'plan', '{}', 'in', 'ALWAYS_SAFE', gen_random_uuid(), 'default', 'default:agent:user:chat')`, group)
	}

	report := h.run(h.retention(0))
	groupTurns := func(group uuid.UUID) int {
		return h.count(`SELECT count(*) FROM reckon_turns WHERE turn_group = $1`, group)
	}
	require.Zero(t, groupTurns(done))
	require.Zero(t, groupTurns(failed))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_messages WHERE turn_id = ANY($1)`, []uuid.UUID{doneFirst, doneLast}))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_turn_decisions WHERE turn_id = ANY($1)`, []uuid.UUID{doneFirst, doneLast}))
	require.False(t, h.exists("reckon_effects", doneEffect), "the group's effect goes after it, in the same run")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_group = $1`, done), "the group's artifacts go with it")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_turn_artifacts WHERE turn_group = $1`, accumulating))

	require.Equal(t, 2, groupTurns(accumulating))
	require.True(t, h.exists("reckon_effects", accumulatingEffect))
	require.Equal(t, 1, groupTurns(processing))
	require.Equal(t, 1, groupTurns(recentlyDone))
	require.Equal(t, 1, groupTurns(superseded), "another group's turn was superseded by it")
	require.Equal(t, 6, h.count(`SELECT count(*) FROM reckon_messages`), "the kept turns keep their messages")

	require.EqualValues(t, 3, report.Removed[retention.TableTurns])
	require.EqualValues(t, 3, report.Removed[retention.TableMessages])
	require.EqualValues(t, 3, report.Removed[retention.TableTurnDecisions])
	require.EqualValues(t, 1, report.Removed[retention.TableEffects])
}

// After every turn of a session is pruned the session goes on: the next turn is numbered from 1
// again (TurnInsert numbers max(seq)+1), and a message id of a pruned turn is accepted as new.
func TestTurnsAfterPruning(t *testing.T) {
	t.Parallel()
	h := setup(t)
	session := "default:agent:user:chat"
	group := uuid.New()
	h.turn(turn{session: session, group: group, age: 40 * day})
	h.turn(turn{session: session, group: group, age: 40 * day})
	h.run(h.retention(0))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_turns WHERE session_key = $1`, session))

	q := dbsqlc.New(h.pool)
	next, err := q.TurnInsert(h.ctx, dbsqlc.TurnInsertParams{
		ID: uuid.New(), SessionKey: session, TurnGroup: uuid.New(), Channel: "chat", MessageIds: []uuid.UUID{},
		FirstAt: h.t0, LastAt: h.t0, Attempt: 1,
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, next.Seq)
	message, err := q.MessageInsert(h.ctx, dbsqlc.MessageInsertParams{ID: uuid.New(), SessionKey: session, MessageID: "msg-1", Channel: "chat", Content: []byte(`{}`)})
	require.NoError(t, err, "msg-1 belonged to a pruned turn: it is new again")
	require.Equal(t, "msg-1", message.MessageID)
}
