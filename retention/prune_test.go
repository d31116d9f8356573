package retention_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/retention"
)

// Finished sagas (COMPLETED, COMPENSATED) past the retention go with their steps, and their step
// effects with them in the same run; their history stays. RUNNING, COMPENSATING and STUCK sagas
// stay, however old, with their steps' effects; recent finished ones stay.
func TestSagas(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	completedStep := h.effect(effect{settled: old})
	completed := h.saga("COMPLETED", old, completedStep)
	compensated := h.saga("COMPENSATED", 31*day, h.effect(effect{state: "FAILED", settled: old}))
	recentStep := h.effect(effect{settled: old})
	recent := h.saga("COMPLETED", 29*day, recentStep)
	kept := map[string]bool{}
	for _, state := range []string{"RUNNING", "COMPENSATING", "STUCK"} {
		step := h.effect(effect{settled: old})
		id := h.saga(state, 400*day, step)
		kept[id.String()] = h.exists("reckon_effects", step)
	}

	report := h.run(h.retention(0))
	require.False(t, h.exists("reckon_sagas", completed))
	require.False(t, h.exists("reckon_sagas", compensated))
	require.False(t, h.exists("reckon_effects", completedStep), "the step's effect goes after its saga, in the same run")
	require.True(t, h.exists("reckon_sagas", recent))
	require.True(t, h.exists("reckon_effects", recentStep))
	for id := range kept {
		require.True(t, h.exists("reckon_sagas", id), "unfinished saga %s kept", id)
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_saga_steps s JOIN reckon_effects e ON e.id = s.effect_id WHERE s.saga_id = $1`, id))
	}
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_saga_steps WHERE saga_id = $1`, completed))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_saga_transitions WHERE saga_id = $1`, completed), "saga history stays")
	requireRemoved(t, report, map[string]int64{retention.TableSagas: 2, retention.TableSagaSteps: 2, retention.TableEffects: 2})
}

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

	requireRemoved(t, report, map[string]int64{
		retention.TableTurns: 3, retention.TableMessages: 3, retention.TableTurnDecisions: 3, retention.TableEffects: 1,
	})
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

// A run goes whole with its effects (compensations included) once it and every effect of it are
// settled past the cutoff. A run with one unsettled effect, one recent effect, an effect that is a
// saga's step, or a recent change of its own stays whole: its effects are never pruned alone,
// which would change its guardrail counts. Runs are per tenant.
func TestRuns(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	h.runRow("default", "done", old)
	done := []uuid.UUID{h.effect(effect{runID: "done", settled: old}), h.effect(effect{runID: "done", state: "FAILED", settled: 35 * day})}
	done = append(done, h.effect(effect{runID: "done", settled: old, compensates: &done[0]}))
	h.runRow("acme", "done", old) // the same run id, another tenant's run: its own
	acmeLive := h.effect(effect{tenant: "acme", runID: "done", state: "PENDING", settled: old})
	acmeSettled := h.effect(effect{tenant: "acme", runID: "done", settled: old})

	kept := map[string][]uuid.UUID{}
	h.runRow("default", "recent-effect", old)
	kept["recent-effect"] = []uuid.UUID{h.effect(effect{runID: "recent-effect", settled: old}), h.effect(effect{runID: "recent-effect", settled: day})}
	h.runRow("default", "stuck", old)
	kept["stuck"] = []uuid.UUID{h.effect(effect{runID: "stuck", settled: old}), h.effect(effect{runID: "stuck", state: "STUCK", settled: old})}
	h.runRow("default", "saga", old)
	sagaStep := h.effect(effect{runID: "saga", settled: old})
	h.saga("RUNNING", old, sagaStep)
	kept["saga"] = []uuid.UUID{sagaStep, h.effect(effect{runID: "saga", settled: old})}
	h.runRow("default", "touched", day)
	kept["touched"] = []uuid.UUID{h.effect(effect{runID: "touched", settled: old})}
	h.runRow("default", "empty", old)

	report := h.run(h.retention(0))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'default' AND id IN ('done', 'empty')`))
	for _, id := range done {
		require.False(t, h.exists("reckon_effects", id))
	}
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'acme' AND id = 'done'`), "acme's run has a PENDING effect")
	require.True(t, h.exists("reckon_effects", acmeLive))
	require.True(t, h.exists("reckon_effects", acmeSettled), "an effect of a live run is never pruned alone")
	for run, ids := range kept {
		require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'default' AND id = $1`, run), "run %s kept", run)
		for _, id := range ids {
			require.True(t, h.exists("reckon_effects", id), "effect of run %s kept", run)
		}
	}
	requireRemoved(t, report, map[string]int64{retention.TableRuns: 2, retention.TableEffects: 3})
}

// Settled effects (CONFIRMED, FAILED) past the effect retention go; recent ones and unsettled ones
// (PENDING, UNKNOWN, STUCK), however old, stay. The history of a pruned effect stays.
func TestEffectsPastRetention(t *testing.T) {
	t.Parallel()
	h := setup(t)
	confirmed := h.effect(effect{settled: 40 * day})
	failed := h.effect(effect{state: "FAILED", settled: 31 * day})
	recent := h.effect(effect{settled: 29 * day})
	kept := []uuid.UUID{recent}
	for _, state := range []string{"PENDING", "UNKNOWN", "STUCK"} {
		kept = append(kept, h.effect(effect{state: state, settled: 400 * day}))
	}

	report := h.run(h.retention(0))
	require.False(t, h.exists("reckon_effects", confirmed))
	require.False(t, h.exists("reckon_effects", failed))
	for _, id := range kept {
		require.True(t, h.exists("reckon_effects", id), "effect %s kept", id)
	}
	require.EqualValues(t, 2, report.Removed[retention.TableEffects])
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effect_transitions WHERE effect_id = $1`, confirmed),
		"the pruned effect's history stays until its partition is dropped")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effect_tombstones`), "no tombstones without a dedup window")

	again := h.run(h.retention(0))
	require.Zero(t, again.RemovedTotal(), "a second run finds nothing")
}

// An effect still referred to stays: a saga's step, an effect of a turn group that still has a
// turn, one whose compensation is unsettled or recent. A compensation goes with the effect it undoes,
// never alone; an effect and its old settled compensation go together.
func TestEffectsReferencedAreKept(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	step := h.effect(effect{settled: old})
	h.saga("RUNNING", old, step)

	group := uuid.New()
	h.turn(turn{group: group, status: "ACCUMULATING", age: old})
	inGroup := h.effect(effect{settled: old, turnGroup: group.String()})

	pendingUndone := h.effect(effect{settled: old})
	pendingCompensation := h.effect(effect{state: "PENDING", settled: old, compensates: &pendingUndone})
	recentUndone := h.effect(effect{settled: old})
	recentCompensation := h.effect(effect{settled: day, compensates: &recentUndone})

	undone := h.effect(effect{settled: old})
	compensation := h.effect(effect{state: "FAILED", settled: old, compensates: &undone})
	youngUndone := h.effect(effect{settled: day})
	lonely := h.effect(effect{settled: old, compensates: &youngUndone})

	notAGroup := h.effect(effect{settled: old, turnGroup: "not-a-uuid"})
	orphanRun := h.effect(effect{settled: old, runID: "run-without-row"})

	report := h.run(h.retention(0))
	for name, id := range map[string]uuid.UUID{
		"saga step": step, "turn group with a turn": inGroup, "compensation pending": pendingUndone, "pending compensation": pendingCompensation,
		"compensation recent": recentUndone, "recent compensation": recentCompensation, "compensation of a recent effect": lonely,
		"recent effect": youngUndone,
	} {
		require.True(t, h.exists("reckon_effects", id), "%s kept", name)
	}
	for name, id := range map[string]uuid.UUID{
		"undone": undone, "its compensation": compensation, "text turn group": notAGroup, "run id without a run": orphanRun,
	} {
		require.False(t, h.exists("reckon_effects", id), "%s pruned", name)
	}
	require.EqualValues(t, 4, report.Removed[retention.TableEffects])
}

// With a dedup window, every pruned effect (compensations and effects of runs too) leaves a
// tombstone of its key until its settle time plus the window — except one whose window has passed
// already. A later run deletes the tombstones whose window has passed.
func TestTombstones(t *testing.T) {
	t.Parallel()
	h := setup(t)
	window := func(c *retention.Config) { c.DedupWindow = 60 * day }
	undone := h.effect(effect{settled: 40 * day})
	compensation := h.effect(effect{state: "FAILED", settled: 40 * day, compensates: &undone})
	h.runRow("default", "run", 40*day)
	inRun := h.effect(effect{runID: "run", settled: 45 * day})
	tooOld := h.effect(effect{settled: 61 * day})

	report := h.run(h.retention(0, window))
	require.EqualValues(t, 4, report.Removed[retention.TableEffects])
	type tombstone struct {
		key, state       string
		settled, expires time.Time
	}
	read := func(id any) (tb tombstone, ok bool) {
		err := h.pool.QueryRow(h.ctx, `SELECT idempotency_key, state, settled_at, expires_at FROM reckon_effect_tombstones WHERE effect_id = $1`, id).
			Scan(&tb.key, &tb.state, &tb.settled, &tb.expires)
		return tb, err == nil
	}
	for _, c := range []struct {
		name    string
		id      any
		state   string
		settled time.Duration
	}{{"undone", undone, "CONFIRMED", 40 * day}, {"compensation", compensation, "FAILED", 40 * day}, {"effect of a run", inRun, "CONFIRMED", 45 * day}} {
		tb, ok := read(c.id)
		require.True(t, ok, "%s left a tombstone", c.name)
		require.Equal(t, c.state, tb.state)
		require.WithinDuration(t, h.t0.Add(-c.settled), tb.settled, time.Millisecond)
		require.WithinDuration(t, h.t0.Add(-c.settled+60*day), tb.expires, time.Millisecond)
	}
	_, ok := read(tooOld)
	require.False(t, ok, "its window had passed: no tombstone")

	// 16 days on, the tombstones of the effects settled 45 days before t0 have expired.
	later := h.run(h.retention(16*day, window))
	require.EqualValues(t, 1, later.Removed[retention.TableTombstones])
	_, ok = read(inRun)
	require.False(t, ok)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effect_tombstones`))
}

// A tombstone that exists for a key (an earlier effect of that key, pruned) is replaced by the
// newer effect's when that is pruned in turn, never by an older one.
func TestTombstoneKeepsTheNewer(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id := h.effect(effect{settled: 40 * day})
	var key string
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT idempotency_key FROM reckon_effects WHERE id = $1`, id).Scan(&key))
	h.exec(`INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
	        VALUES ('default', $1, gen_random_uuid(), 'FAILED', $2, $3)`, key, h.t0.Add(-50*day), h.t0.Add(10*day))
	h.run(h.retention(0, func(c *retention.Config) { c.DedupWindow = 60 * day }))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_effect_tombstones WHERE effect_id = $1 AND state = 'CONFIRMED'`, id))
}

// A dry run changes nothing — no row, no tombstone, no partition — and counts what the run after it
// removes, including the effects that the sagas and turn groups pruned first in that run free.
func TestDryRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	h.saga("COMPLETED", old, h.effect(effect{settled: old}))
	group := uuid.New()
	h.turn(turn{group: group, age: old})
	h.effect(effect{settled: old, turnGroup: group.String()})
	h.runRow("default", "r", old)
	h.effect(effect{runID: "r", settled: old})
	undone := h.effect(effect{settled: old})
	h.effect(effect{settled: old, compensates: &undone})
	h.effect(effect{state: "PENDING", settled: old})
	h.exec(`INSERT INTO reckon_idempotency_keys (tenant_id, key, method, path, request_sha256, status, response, created_at)
	        VALUES ('default', 'k', 'POST', '/v1/effects', '\x00', 201, '{}', $1)`, h.t0.Add(-2*day))
	h.exec(`INSERT INTO reckon_callback_signatures (signature, effect_id, expires_at) VALUES (sha256('s'), gen_random_uuid(), $1)`, h.t0.Add(-day))
	// An expired console session and a live one: only the first goes.
	h.exec(`INSERT INTO reckon_operators (id, name, role, prefix, token_sha256) VALUES ('00000000-0000-0000-0000-000000000001', 'ann', 'viewer', 'rko_', sha256('t'))`)
	h.exec(`INSERT INTO reckon_operator_sessions (id_sha256, operator_id, csrf, expires_at)
	        VALUES (sha256('old'), '00000000-0000-0000-0000-000000000001', 'c', $1), (sha256('live'), '00000000-0000-0000-0000-000000000001', 'c', $2)`,
		h.t0.Add(-time.Hour), h.t0.Add(time.Hour))
	h.exec(`INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
	        VALUES ('default', 'gone', gen_random_uuid(), 'CONFIRMED', $1, $2)`, h.t0.Add(-90*day), h.t0.Add(-day))
	configure := func(c *retention.Config) { c.DedupWindow = 60 * day; c.AuditRetention = 400 * day }

	snapshot := func() map[string]int {
		counts := map[string]int{}
		for _, table := range []string{"reckon_effects", "reckon_sagas", "reckon_saga_steps", "reckon_turns", "reckon_messages",
			"reckon_turn_decisions", "reckon_runs", "reckon_effect_tombstones", "reckon_idempotency_keys", "reckon_callback_signatures",
			"reckon_operator_sessions", "reckon_audit_partitions", "reckon_audit_drops"} {
			counts[table] = h.count("SELECT count(*) FROM " + table)
		}
		return counts
	}
	before := snapshot()
	dry, err := h.retention(0, configure).Run(h.ctx, &retention.RunOpts{Actor: "test", DryRun: true})
	require.NoError(t, err)
	require.True(t, dry.DryRun)
	require.Equal(t, before, snapshot(), "a dry run changes nothing")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_retention_runs WHERE dry_run AND finished_at IS NOT NULL`), "it is recorded")

	real := h.run(h.retention(0, configure))
	dry.Removed[retention.TableRetentionRuns] = real.Removed[retention.TableRetentionRuns]
	require.Equal(t, real.Removed, dry.Removed)
	require.EqualValues(t, 5, real.Removed[retention.TableEffects])
	require.EqualValues(t, 1, real.Removed[retention.TableIdempotencyKeys])
	require.EqualValues(t, 1, real.Removed[retention.TableCallbackSignatures])
	require.EqualValues(t, 1, real.Removed[retention.TableTombstones])
	require.EqualValues(t, 1, real.Removed[retention.TableOperatorSessions])
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_operator_sessions WHERE id_sha256 = sha256('live')`), "the live session stays")
}
