package turns_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// A commit whose staged mutation fails leaves no mutation, no effect, no saga, no job and no change
// to the turn; the next run attempts the messages again in the same turn group.
func TestFailingStagedMutationCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var fail atomic.Bool
	fail.Store(true)
	var before *turns.Record
	var h *harness
	pool := pgtest.NewDB(t)
	sagas, err := saga.NewClient(pool, &saga.Config{})
	require.NoError(t, err)
	h = setupOn(t, pool, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		var err error
		if before, err = h.tc.Get(ctx, turn.ID); err != nil {
			return err
		}
		if err := stageNote(turn, "staged"); err != nil {
			return err
		}
		if err := turn.Enqueue(refundSpec(turn, 0, 250)); err != nil {
			return err
		}
		// A real saga start in the commit transaction.
		if err := turn.Stage(func(ctx context.Context, tx pgx.Tx) error {
			_, err := sagas.StartTx(ctx, tx, "turn-followup", map[string]string{"turn": turn.ID.String()},
				&saga.StartOpts{TenantID: turn.Tenant, Key: "followup/" + turn.Group.String()})
			return err
		}); err != nil {
			return err
		}
		return turn.Stage(func(ctx context.Context, tx pgx.Tx) error {
			if fail.Load() {
				_, err := tx.Exec(ctx, `INSERT INTO app_notes (turn_id, note) VALUES ($1, NULL)`, turn.ID) // NOT NULL
				return err
			}
			return nil
		})
	})}, sagas)
	require.NoError(t, sagas.Register(saga.Definition{Name: "turn-followup", Steps: []saga.Step{{
		Name: "refund",
		Effect: func(in saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: "bank.refund", Args: map[string]int{"amount": 1}}, nil
		},
		Undo: saga.NoUndo(),
	}}}))
	session := newSession("web")
	h.submit(session, "m1")

	_, err = h.tc.RunTurn(ctx, session)
	require.ErrorContains(t, err, "staged mutation 3")
	require.ErrorContains(t, err, "not-null")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM app_notes`), "no mutation")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`), "no effect (neither the turn's nor the saga's first step)")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_sagas`), "no saga")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE kind <> 'reckon_turn'`), "no job")
	after, err := h.tc.Get(ctx, before.ID)
	require.NoError(t, err)
	require.Equal(t, before, after, "no turn change")
	require.Equal(t, turns.StatusProcessing, after.Status)
	require.Equal(t, 1.0, h.metric("reckon_turn_attempt_failures_total", map[string]string{}))

	// The next run takes the turn over and commits all of it.
	fail.Store(false)
	result, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, result.Turn.Status)
	require.Equal(t, before.Group, result.Turn.Group)
	require.Equal(t, 2, result.Turn.Attempt)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM app_notes WHERE turn_id = $1`, result.Turn.ID))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects WHERE turn_id = $1`, result.Turn.ID))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_sagas WHERE name = 'turn-followup' AND start_key = $1 AND state = 'RUNNING'`,
		"followup/"+before.Group.String()), "the saga, started with the turn")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effects e JOIN reckon_saga_steps s ON s.effect_id = e.id WHERE e.owner = 'saga'`),
		"the saga's first step")
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects WHERE state = 'PENDING' AND job_id IS NULL AND queue IS NOT NULL`),
		"the turn's effect and the saga's step, each waiting for a reactor to claim it")
	require.True(t, result.Turn.CommitPointReached)
	require.NotNil(t, result.Turn.CompletedAt)
}

// A turn that fails on every attempt becomes FAILED with its messages, and is not tried again.
func TestTurnFailsAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls atomic.Int32
	h := setup(t, turns.Config{MaxAttempts: 2, Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		calls.Add(1)
		panic("handler bug")
	})})
	session := newSession("web")
	h.submit(session, "poison")
	for range 2 {
		_, err := h.tc.RunTurn(ctx, session)
		require.ErrorContains(t, err, "handler panicked: handler bug")
	}
	_, err := h.tc.RunTurn(ctx, session)
	require.ErrorIs(t, err, turns.ErrNoTurn)
	require.Equal(t, int32(2), calls.Load())
	records := h.turnsOf(session)
	require.Len(t, records, 2)
	require.Equal(t, turns.StatusSuperseded, records[0].Status)
	require.Equal(t, turns.StatusFailed, records[1].Status)
	require.Equal(t, records[0].Group, records[1].Group)
	require.Equal(t, []string{"poison"}, h.messageIDs(records[1].ID), "the messages stay with the failed turn")
	require.Equal(t, 1.0, h.metric("reckon_turn_ended_total", map[string]string{"status": "FAILED"}))

	// A new message starts afresh.
	h.submit(session, "next")
	_, err = h.tc.RunTurn(ctx, session)
	require.Error(t, err)
	records = h.turnsOf(session)
	require.Len(t, records, 3)
	require.NotEqual(t, records[1].Group, records[2].Group)
	require.Equal(t, []string{"next"}, h.messageIDs(records[2].ID))
}

// Beat idempotency: a message id submitted twice is one message; the same set of messages of a
// session is processed by one turn (the database refuses a second).
func TestBeatIdempotency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls atomic.Int32
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		calls.Add(1)
		return nil
	})})
	session := newSession("web")
	first := h.submit(session, "m1")
	again := h.submit(session, "m1")
	require.False(t, first.Deduplicated)
	require.True(t, again.Deduplicated)
	require.Equal(t, first.ID, again.ID)
	result, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, []string{"m1"}, h.messageIDs(result.Turn.ID))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_turn'`), "one job")

	resubmitted := h.submit(session, "m1")
	require.True(t, resubmitted.Deduplicated, "a processed message is not processed again")
	_, err = h.tc.RunTurn(ctx, session)
	require.ErrorIs(t, err, turns.ErrNoTurn)
	require.Equal(t, int32(1), calls.Load())

	// The database refuses a second turn with the same beat key.
	_, err = h.pool.Exec(ctx, `INSERT INTO reckon_turns (id, session_key, seq, turn_group, status, channel, message_ids, beat_key, first_at, last_at, window_ms, started_at)
		SELECT gen_random_uuid(), session_key, seq + 1, gen_random_uuid(), 'COMPLETE', channel, message_ids, beat_key, first_at, last_at, 0, now()
		FROM reckon_turns WHERE id = $1`, result.Turn.ID)
	require.ErrorContains(t, err, "reckon_turns_beat_uniq")
}

// Bad input changes nothing and never panics.
func TestSubmitRejectsBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(context.Context, *turns.Turn) error { return nil })})
	for _, key := range []string{"", "a:b:c", "a::c:d", "a:b:c:d:e"} {
		_, err := h.tc.Submit(ctx, turns.Inbound{SessionKey: key})
		require.ErrorIs(t, err, turns.ErrInvalidSessionKey, key)
		_, err = h.tc.RunTurn(ctx, key)
		require.ErrorIs(t, err, turns.ErrInvalidSessionKey, key)
	}
	_, err := h.tc.Submit(ctx, turns.Inbound{SessionKey: newSession("web"), Content: []byte("{not json")})
	require.ErrorContains(t, err, "not valid JSON")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_messages`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_turns`))

	_, err = turns.NewClient(h.pool, &turns.Config{Handler: turns.HandlerFunc(func(context.Context, *turns.Turn) error { return nil }),
		Policies: map[string]turns.ChannelPolicy{"web": {Mode: "sometimes"}}})
	require.ErrorContains(t, err, `aggregation mode "sometimes"`)
	unattached, err := turns.NewClient(h.pool, &turns.Config{Handler: turns.HandlerFunc(func(context.Context, *turns.Turn) error { return nil })})
	require.NoError(t, err)
	_, err = unattached.Submit(ctx, turns.Inbound{SessionKey: newSession("web")})
	require.ErrorIs(t, err, turns.ErrNotAttached)
	_, err = effects.NewClient(h.pool, &effects.Config{Registry: effects.NewRegistry(), Plugins: []effects.Plugin{h.tc}})
	require.ErrorContains(t, err, "already installed", "a turns client belongs to one effects client")
}

// A process that only submits messages needs no handler: its client records the message and
// schedules the turn (RunTurn there says it is not ready), and a reactor with a handler on the
// same database runs the turn.
func TestSubmitOnlyClientNeedsNoHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	submitter, err := turns.NewClient(pool, &turns.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ec, err := effects.NewClient(pool, &effects.Config{Registry: effects.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Plugins: []effects.Plugin{submitter}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ec.Stop(context.Background())) })
	session := newSession("web")
	_, err = submitter.Submit(ctx, turns.Inbound{SessionKey: session, MessageID: "m1"})
	require.NoError(t, err)
	_, err = submitter.RunTurn(ctx, session)
	require.ErrorIs(t, err, turns.ErrNotReady)

	h := setupOn(t, pool, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		return turn.Enqueue(refundSpec(turn, 0, 7))
	})})
	h.start()
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM reckon_turns WHERE session_key = $1 AND status = 'COMPLETE'`, session) == 1
	}, 15*time.Second, 20*time.Millisecond, "the reactor ran the submitted turn")
}

// A turn refuses bad staging with a clear error and stages nothing; methods after the handler
// returned report ErrTurnEnded.
func TestTurnRejectsBadStaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var kept *turns.Turn
	var errs []error
	h := setup(t, turns.Config{Handler: turns.HandlerFunc(func(ctx context.Context, turn *turns.Turn) error {
		kept = turn
		errs = append(errs,
			turn.Stage(nil),
			turn.Enqueue(effects.Spec{Connector: "bank.refund"}),
			turn.Enqueue(effects.Spec{Connector: "no.such", Position: turn.Position(0, 0)}),
		)
		_, err := turn.Do(ctx, effects.Spec{Connector: "no.such", Position: turn.Position(0, 0)})
		errs = append(errs, err)
		return nil
	})})
	session := newSession("web")
	h.submit(session, "m1")
	result, err := h.tc.RunTurn(ctx, session)
	require.NoError(t, err)
	require.Equal(t, turns.StatusComplete, result.Turn.Status)
	require.Empty(t, result.Effects)
	require.ErrorContains(t, errs[0], "nil function")
	require.ErrorContains(t, errs[1], "IdempotencyKey or a Position")
	require.ErrorIs(t, errs[2], effects.ErrUnknownConnector)
	require.ErrorIs(t, errs[3], effects.ErrUnknownConnector)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`))

	require.ErrorIs(t, kept.Stage(func(context.Context, pgx.Tx) error { return nil }), turns.ErrTurnEnded)
	require.ErrorIs(t, kept.Enqueue(refundSpec(kept, 0, 1)), turns.ErrTurnEnded)
	_, err = kept.BeforeIrreversible(ctx)
	require.ErrorIs(t, err, turns.ErrTurnEnded)
	_, err = kept.HasPendingMessages(ctx)
	require.ErrorIs(t, err, turns.ErrTurnEnded)
}

// stageNote stages an app_notes row of turn: the handler's own write, committed with the turn or
// not at all.
func stageNote(turn *turns.Turn, note string) error {
	return turn.Stage(func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO app_notes (turn_id, note) VALUES ($1, $2)`, turn.ID, note)
		return err
	})
}
