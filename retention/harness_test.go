package retention_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/retention"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const day = 24 * time.Hour

// harness is a test's database and the clock its retention runs on: rows are written at the
// database's now (t0) and aged by moving the clock or their timestamps.
type harness struct {
	t       *testing.T
	ctx     context.Context
	pool    *pgxpool.Pool
	t0      time.Time
	metrics *prometheus.Registry
	seq     atomic.Int64
}

func setup(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), pool: pgtest.NewDB(t), metrics: prometheus.NewRegistry()}
	require.NoError(t, h.pool.QueryRow(h.ctx, `SELECT now()`).Scan(&h.t0))
	return h
}

// retention returns a Retention whose clock is t0 + after, configured by configure over the
// defaults (30 days of effect retention, no audit retention, no tombstones).
func (h *harness) retention(after time.Duration, configure ...func(*retention.Config)) *retention.Retention {
	h.t.Helper()
	cfg := &retention.Config{
		Now:    func() time.Time { return h.t0.Add(after) },
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, fn := range configure {
		fn(cfg)
	}
	r, err := retention.New(h.pool, cfg)
	require.NoError(h.t, err)
	return r
}

// run runs r and requires it to succeed.
func (h *harness) run(r *retention.Retention) *retention.Report {
	h.t.Helper()
	report, err := r.Run(h.ctx, &retention.RunOpts{Actor: "test"})
	require.NoError(h.t, err)
	return report
}

// requireRemoved requires report to count, for each table of want, the rows want gives.
func requireRemoved(t *testing.T, report *retention.Report, want map[string]int64) {
	t.Helper()
	for table, n := range want {
		require.Equal(t, n, report.Removed[table], table)
	}
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	_, err := h.pool.Exec(h.ctx, sql, args...)
	require.NoError(h.t, err, sql)
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, sql, args...)
}

// holdLock takes the retention lock, as a running retention would, on a connection of its own
// that the test releases at its end, and returns that connection.
func (h *harness) holdLock() *pgxpool.Conn {
	h.t.Helper()
	holder, err := h.pool.Acquire(h.ctx)
	require.NoError(h.t, err)
	h.t.Cleanup(holder.Release)
	_, err = holder.Exec(h.ctx, `SELECT pg_advisory_lock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyRetention)
	require.NoError(h.t, err)
	return holder
}

// exists reports whether the row of table with that id exists.
func (h *harness) exists(table string, id any) bool {
	h.t.Helper()
	return h.count(fmt.Sprintf(`SELECT count(*) FROM %s WHERE id = $1`, table), id) == 1
}

// effect describes an effect to insert; zero values: tenant "default", CONFIRMED, settled at t0.
type effect struct {
	tenant      string
	state       string
	settled     time.Duration // age at t0: updated_at = t0 - settled
	runID       string
	turnGroup   string
	compensates *uuid.UUID
}

// effect inserts an effect through the transition trigger (born PENDING, moved to its state with an
// actor and a reason, as the engine does) and ages it with an UPDATE that records nothing.
func (h *harness) effect(e effect) uuid.UUID {
	h.t.Helper()
	e.tenant = cmp.Or(e.tenant, "default")
	e.state = cmp.Or(e.state, "CONFIRMED")
	id := uuid.New()
	h.exec(`INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, run_id, turn_group, compensates_id,
	            transition_actor, transition_reason)
	        VALUES ($1, $2, 'bank.wire', $3, 'idempotent', nullif($4, ''), nullif($5, ''), $6, 'test', 'enqueued')`,
		id, e.tenant, fmt.Sprintf("key-%d", h.seq.Add(1)), e.runID, e.turnGroup, e.compensates)
	path := map[string][]string{
		"PENDING": nil, "CONFIRMED": {"CONFIRMED"}, "FAILED": {"FAILED"}, "UNKNOWN": {"UNKNOWN"}, "STUCK": {"UNKNOWN", "STUCK"},
	}[e.state]
	for _, state := range path {
		h.exec(`UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'settled' WHERE id = $1`, id, state)
	}
	h.exec(`UPDATE reckon_effects SET updated_at = $2, created_at = least(created_at, $2) WHERE id = $1`, id, h.t0.Add(-e.settled))
	return id
}

// saga inserts a saga in state, last changed settled before t0, with one step per effect.
func (h *harness) saga(state string, settled time.Duration, steps ...uuid.UUID) uuid.UUID {
	h.t.Helper()
	id := uuid.New()
	h.exec(`INSERT INTO reckon_sagas (id, tenant_id, name, state, step_count, updated_at) VALUES ($1, 'default', 'order', $2, $3, $4)`,
		id, state, max(len(steps), 1), h.t0.Add(-settled))
	h.exec(`INSERT INTO reckon_saga_transitions (saga_id, to_state, step, actor, reason) VALUES ($1, 'RUNNING', 0, 'test', 'started')`, id)
	for i, effectID := range steps {
		h.exec(`INSERT INTO reckon_saga_steps (saga_id, idx, name, effect_id) VALUES ($1, $2, $3, $4)`, id, i, fmt.Sprintf("step-%d", i), effectID)
	}
	return id
}

// turn describes a turn of a turn group to insert; zero values: session "default:agent:user:chat",
// COMPLETE, created and completed at t0.
type turn struct {
	session      string
	group        uuid.UUID
	status       string
	age          time.Duration // created and completed at t0 - age
	completed    *time.Duration
	supersededBy *uuid.UUID
}

// turn inserts a turn with one message and one decision.
func (h *harness) turn(tr turn) uuid.UUID {
	h.t.Helper()
	tr.session = cmp.Or(tr.session, "default:agent:user:chat")
	tr.status = cmp.Or(tr.status, "COMPLETE")
	id := uuid.New()
	created := h.t0.Add(-tr.age)
	var completed *time.Time
	switch {
	case tr.completed != nil:
		at := h.t0.Add(-*tr.completed)
		completed = &at
	case tr.status == "COMPLETE" || tr.status == "SUPERSEDED" || tr.status == "FAILED":
		completed = &created
	}
	h.exec(`INSERT INTO reckon_turns (id, session_key, seq, turn_group, status, channel, first_at, last_at, window_ms, created_at, completed_at, superseded_by)
	        VALUES ($1, $2, (SELECT coalesce(max(seq), 0) + 1 FROM reckon_turns WHERE session_key = $2), $3, $4, 'chat', $5, $5, 0, $5, $6, $7)`,
		id, tr.session, tr.group, tr.status, created, completed, tr.supersededBy)
	h.exec(`INSERT INTO reckon_messages (id, session_key, message_id, channel, received_at, turn_id) VALUES ($1, $2, $3, 'chat', $4, $5)`,
		uuid.New(), tr.session, fmt.Sprintf("msg-%d", h.seq.Add(1)), created, id)
	h.exec(`INSERT INTO reckon_turn_decisions (turn_id, session_key, action, decider, message_ids) VALUES ($1, $2, 'QUEUE', 'default', '{}')`, id, tr.session)
	return id
}

// runRow inserts the tenant's run, last changed age before t0.
func (h *harness) runRow(tenant, id string, age time.Duration) {
	h.t.Helper()
	h.exec(`INSERT INTO reckon_runs (tenant_id, id, created_at, updated_at) VALUES ($1, $2, $3, $3)`, tenant, id, h.t0.Add(-age))
}

func ptr[T any](v T) *T { return &v }
