package effects_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

// hookRecorder is a SettleHook that writes what it is told into hook_log in the settling
// transaction, and fails while failNext > 0.
type hookRecorder struct {
	mu       sync.Mutex
	calls    []effects.State
	failNext int
	// transient makes the failures look like Postgres aborting the transaction (a deadlock).
	transient bool
}

func (r *hookRecorder) hook(ctx context.Context, tx pgx.Tx, e *effects.Effect) error {
	r.mu.Lock()
	r.calls = append(r.calls, e.State)
	fail := r.failNext > 0
	if fail {
		r.failNext--
	}
	r.mu.Unlock()
	// The transition is visible in tx: the hook runs inside it.
	var state string
	if err := tx.QueryRow(ctx, `SELECT state FROM reckon_effects WHERE id = $1`, e.ID).Scan(&state); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO hook_log (effect_id, state, seen) VALUES ($1, $2, $3)`, e.ID, string(e.State), state); err != nil {
		return err
	}
	if fail {
		if r.transient {
			return fmt.Errorf("enqueue the next step: %w", &pgconn.PgError{Code: "40P01", Message: "deadlock detected"})
		}
		return errors.New("hook says no")
	}
	return nil
}

func (r *hookRecorder) seen() []effects.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]effects.State(nil), r.calls...)
}

func (h *harness) hookLog(id uuid.UUID) []string {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT state || '/' || seen FROM hook_log WHERE effect_id = $1 ORDER BY id`, id)
	require.NoError(h.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(h.t, err)
	return out
}

func setupHooked(t *testing.T) (*harness, *hookRecorder) {
	rec := &hookRecorder{}
	h := setup(t, func(c *effects.Config) { c.Plugins = []effects.Plugin{effects.OnSettle("test", rec.hook)} })
	_, err := h.pool.Exec(context.Background(), `CREATE TABLE hook_log (id serial PRIMARY KEY, effect_id uuid, state text, seen text)`)
	require.NoError(t, err)
	return h, rec
}

func (h *harness) enqueueOwned(connector, key string, amount int) *effects.Effect {
	h.t.Helper()
	effect, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: connector, IdempotencyKey: key, Owner: "test", Args: map[string]any{"account": "acct-1", "amount": amount},
	}, nil)
	require.NoError(h.t, err)
	require.Equal(h.t, "test", effect.Owner)
	return effect
}

// An owned effect's dispatch outcome runs the owner's hook in the settling transaction (not group
// commit): what the hook writes commits with the transition, and a hook error rolls both back. The
// bank performed the wire, so the rolled-back outcome is recovered by reconciliation, not by a
// second call.
func TestSettleHookRunsInTheSettlingTransaction(t *testing.T) {
	t.Parallel()
	h, rec := setupHooked(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true})
	h.start()

	ok := h.wait(h.enqueueOwned("bank.wire", "hook-ok", 10).ID)
	require.Equal(t, effects.StateConfirmed, ok.State)
	require.Equal(t, []string{"CONFIRMED/CONFIRMED"}, h.hookLog(ok.ID), "the hook saw its own transition inside the transaction")

	rec.mu.Lock()
	rec.failNext = 1
	rec.mu.Unlock()
	failed := h.wait(h.enqueueOwned("bank.wire", "hook-fails-once", 20).ID)
	require.Equal(t, effects.StateConfirmed, failed.State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(failed.ID),
		"the first PENDING>CONFIRMED was rolled back with the hook's error")
	require.Equal(t, []string{"CONFIRMED/CONFIRMED"}, h.hookLog(failed.ID), "the failed hook's write was rolled back too")
	require.Equal(t, []effects.State{effects.StateConfirmed, effects.StateConfirmed, effects.StateConfirmed}, rec.seen())
	require.Equal(t, 1, h.bank.Count("hook-fails-once"), "performed once")

	// An unowned effect does not call the hook.
	plain := h.wait(h.enqueue("bank.wire", "hook-none", 5).ID)
	require.Equal(t, effects.StateConfirmed, plain.State)
	require.Empty(t, h.hookLog(plain.ID))
	require.Len(t, rec.seen(), 3)
}

// A settling transaction that Postgres aborts — a deadlock between the hook's writes and an
// operator's, say — is run again at once: the connector's definite answer is recorded as it was
// given, not handed back to River, whose re-run of a non-idempotent effect could only declare the
// outcome unknown.
func TestTransientAbortOfTheSettlingTransactionIsRetried(t *testing.T) {
	t.Parallel()
	h, rec := setupHooked(t)
	h.wire(fakebank.ConnectorOptions{Compensate: true}) // no status check: an UNKNOWN outcome would end STUCK
	h.start()
	rec.mu.Lock()
	rec.failNext, rec.transient = 2, true
	rec.mu.Unlock()
	done := h.wait(h.enqueueOwned("bank.wire", "hook-deadlock", 30).ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(done.ID))
	require.Equal(t, []string{"CONFIRMED/CONFIRMED"}, h.hookLog(done.ID))
	require.Len(t, rec.seen(), 3, "two aborted runs of the transaction, then the one that committed")
	require.Equal(t, 1, h.bank.Count("hook-deadlock"), "performed once")
}

// FAILED and STUCK run the hook too, and so does an operator's Resolve, whose error then comes back
// to the operator with nothing changed.
func TestSettleHookOnFailedStuckAndResolve(t *testing.T) {
	t.Parallel()
	h, rec := setupHooked(t)
	h.wire(fakebank.ConnectorOptions{Compensate: true})
	h.start()
	ctx := context.Background()

	h.bank.Script("hook-reject", fakebank.Reject)
	rejected := h.wait(h.enqueueOwned("bank.wire", "hook-reject", 10).ID)
	require.Equal(t, effects.StateFailed, rejected.State)
	require.Equal(t, []string{"FAILED/FAILED"}, h.hookLog(rejected.ID))

	h.bank.Script("hook-blind", fakebank.PerformThenDrop)
	stuck := h.wait(h.enqueueOwned("bank.wire", "hook-blind", 10).ID)
	require.Equal(t, effects.StateStuck, stuck.State)
	require.Equal(t, []string{"STUCK/STUCK"}, h.hookLog(stuck.ID))

	rec.mu.Lock()
	rec.failNext = 1
	rec.mu.Unlock()
	_, err := h.client.Resolve(ctx, stuck.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "bank confirmed by phone"}, nil)
	require.ErrorContains(t, err, "hook says no")
	still, err := h.client.Get(ctx, stuck.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateStuck, still.State, "the hook's error rolled the resolution back")

	resolved, err := h.client.Resolve(ctx, stuck.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "alice", Reason: "bank confirmed by phone"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, resolved.State)
	require.Equal(t, []string{"STUCK/STUCK", "CONFIRMED/CONFIRMED"}, h.hookLog(stuck.ID))
	require.Equal(t, []effects.State{effects.StateFailed, effects.StateStuck, effects.StateConfirmed, effects.StateConfirmed}, rec.seen())
}

// An owner without a hook in the process is refused everywhere: enqueue, compensation, an
// operator's resolution, and a reactor, which leaves the effect alone without calling out.
func TestMissingSettleHookIsRefused(t *testing.T) {
	t.Parallel()
	h, _ := setupHooked(t)
	h.wire(fakebank.ConnectorOptions{Compensate: true})
	ctx := context.Background()

	_, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "nobody-1", Owner: "nobody",
		Args: map[string]any{"account": "a", "amount": 1}}, nil)
	require.ErrorIs(t, err, effects.ErrNoSettleHook)
	_, err = h.client.Do(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "nobody-2", Owner: "nobody",
		Args: map[string]any{"account": "a", "amount": 1}})
	require.ErrorIs(t, err, effects.ErrNoSettleHook)
	require.Equal(t, 0, h.count(`SELECT count(*) FROM reckon_effects`), "nothing recorded")
	require.Equal(t, 0, h.bank.Calls("/wires"))

	// A reactor without the hook: another client on the same database, registry and bank.
	reactor, err := effects.NewClient(h.pool, testkit.FastConfig(h.registry))
	require.NoError(t, err)
	require.NoError(t, reactor.Start(ctx))
	t.Cleanup(func() { require.NoError(t, reactor.Stop(context.Background())) })
	owned := h.enqueueOwned("bank.wire", "unhooked-1", 10)
	require.Eventually(t, func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE args->>'effect_id' = $1 AND state = 'scheduled' AND (metadata->>'snoozes')::int >= 1`, owned.ID.String()) == 1
	}, 10*time.Second, 20*time.Millisecond, "the reactor snoozed the job")
	require.Equal(t, 0, h.bank.Calls("/wires"), "nothing was called")
	stored, err := h.client.Get(ctx, owned.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StatePending, stored.State)
	require.Equal(t, 0, stored.Attempts)

	// An operator's resolution through a client without the hook.
	h.bank.Script("unhooked-2", fakebank.PerformThenDrop)
	require.NoError(t, reactor.Stop(ctx))
	h.start()
	stuck := h.wait(h.enqueueOwned("bank.wire", "unhooked-2", 10).ID)
	require.Equal(t, effects.StateStuck, stuck.State)
	_, err = reactor.Resolve(ctx, stuck.ID, effects.Resolution{To: effects.StateConfirmed, Actor: "bob", Reason: "confirmed"}, nil)
	require.ErrorIs(t, err, effects.ErrNoSettleHook)
	stored, err = h.client.Get(ctx, stuck.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateStuck, stored.State)

	// Compensating with an owner that has no hook.
	require.Equal(t, effects.StateConfirmed, h.wait(h.enqueue("bank.wire", "plain-1", 3).ID).State)
	plain, err := h.client.Get(ctx, mustID(t, h, "plain-1"))
	require.NoError(t, err)
	err = h.inTx(func(tx pgx.Tx) error {
		_, err := h.client.CompensateTx(ctx, tx, plain.ID, "test", "undo", &effects.CompensateOpts{Owner: "nobody"})
		return err
	})
	require.ErrorIs(t, err, effects.ErrNoSettleHook)
}

func mustID(t *testing.T, h *harness, key string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT id FROM reckon_effects WHERE idempotency_key = $1`, key).Scan(&id))
	return id
}

// The owner is part of an effect's identity: the same key enqueued under another owner conflicts.
func TestOwnerIsPartOfTheIdempotencyCheck(t *testing.T) {
	t.Parallel()
	h, _ := setupHooked(t)
	h.wire(fakebank.ConnectorOptions{Compensate: true})
	plain := h.enqueue("bank.wire", "same-key", 10)
	_, err := h.client.Enqueue(context.Background(), effects.Spec{
		Connector: "bank.wire", IdempotencyKey: "same-key", Owner: "test", Args: map[string]any{"account": "acct-1", "amount": 10},
	}, nil)
	require.ErrorIs(t, err, effects.ErrIdempotencyConflict)
	again := h.enqueue("bank.wire", "same-key", 10)
	require.True(t, again.Deduplicated)
	require.Equal(t, plain.ID, again.ID)
}
