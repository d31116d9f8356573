package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
)

var (
	wireTags       = []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork}
	idempotentTags = []effects.Tag{effects.TagWrite, effects.TagIdempotent, effects.TagExternal, effects.TagNetwork}
)

func TestHappyPath(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true})
	h.start()

	effect := h.enqueue("bank.wire", "order-1/refund", 250)
	require.Equal(t, effects.StatePending, effect.State)
	require.False(t, effect.Deduplicated)
	require.Equal(t, effects.PolicyCompensatable, effect.Policy)

	done := h.wait(effect.ID)
	require.Equal(t, effects.StateConfirmed, done.State)
	require.Equal(t, 1, done.Attempts)
	require.JSONEq(t, `{"wire_id":"w-1","key":"order-1/refund","amount":250}`, string(done.Result))
	require.Equal(t, 1, h.bank.Count("order-1/refund"))
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE state NOT IN ('completed')`), "no job left behind")
	// The job was completed in the transaction that confirmed the effect: both carry that
	// transaction's now() (River's own completer would stamp its own clock).
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job j JOIN reckon_effect_transitions t
		ON t.effect_id = $1 AND t.to_state = 'CONFIRMED' AND j.finalized_at = t.at
		WHERE j.kind = 'reckon_dispatch'`, effect.ID))
	// Counted after the commit that Wait saw.
	require.Eventually(t, func() bool {
		return h.metric("reckon_effect_transitions_total", map[string]string{"connector": "bank.wire", "policy": "compensatable", "from": "PENDING", "to": "CONFIRMED"}) == 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 0.0, h.metric("reckon_effects", map[string]string{"state": "PENDING"}))
	problems, err := testutil.GatherAndLint(h.metrics)
	require.NoError(t, err)
	require.Empty(t, problems)
}

func TestEnqueueDeduplicatesAndDetectsConflicts(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()

	first := h.enqueue("bank.wire", "k-1", 100)
	again, err := h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "k-1",
		Args: json.RawMessage(`{ "amount": 100, "account": "acct-1" }`)}, nil) // same JSON, other spelling
	require.NoError(t, err)
	require.True(t, again.Deduplicated)
	require.Equal(t, first.ID, again.ID)

	_, err = h.client.Enqueue(ctx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "k-1",
		Args: map[string]any{"account": "acct-1", "amount": 999}}, nil)
	require.ErrorIs(t, err, effects.ErrIdempotencyConflict)

	// Another tenant has its own key space.
	other, err := h.client.Enqueue(ctx, effects.Spec{TenantID: "other", Connector: "bank.wire", IdempotencyKey: "k-1",
		Args: map[string]any{"account": "acct-1", "amount": 999}}, nil)
	require.NoError(t, err)
	require.False(t, other.Deduplicated)

	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_effects WHERE job_id IS NULL AND queue = 'reckon'`),
		"each left for the claimers of its queue")
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job`), "no job at enqueue, none for duplicates")
}

// atOnce runs fn n times at once and returns the effects it returned, failing on any error.
func atOnce(t *testing.T, n int, fn func() (*effects.Effect, error)) []*effects.Effect {
	t.Helper()
	out := make([]*effects.Effect, n)
	errs := make([]error, n)
	testkit.AtOnce(n, func(i int) { out[i], errs[i] = fn() })
	for _, err := range errs {
		require.NoError(t, err)
	}
	return out
}

// requireOneEffect checks that the calls all returned one effect, of which exactly one call
// recorded it and the others were deduplicated.
func requireOneEffect(t *testing.T, got []*effects.Effect) {
	t.Helper()
	fresh := 0
	for _, e := range got {
		require.Equal(t, got[0].ID, e.ID, "one effect per key")
		if !e.Deduplicated {
			fresh++
		}
	}
	require.LessOrEqual(t, fresh, 1, "at most one call recorded the effect")
}

func wire(amount int) map[string]any { return map[string]any{"account": "acct-1", "amount": amount} }

// TestDeduplicatedEnqueueRecordsNothing: on every path that inserts an effect — enqueue left for
// the claimers, enqueue with its dispatch job, a batch, Do, a compensation, an effect held for a
// person's confirmation — the same key enqueued again, one call after the other and many at once,
// leaves exactly one effect with one history row and one event for its insert, and no history or
// event about an effect that does not exist.
func TestDeduplicatedEnqueueRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := func(key string) effects.Spec {
		return effects.Spec{Connector: "bank.wire", IdempotencyKey: key, Args: wire(5)}
	}
	twiceThenAtOnce := func(t *testing.T, key string, enqueue func(key string) (*effects.Effect, error)) {
		t.Helper()
		var got []*effects.Effect
		for range 2 {
			e, err := enqueue(key)
			require.NoError(t, err)
			got = append(got, e)
		}
		require.False(t, got[0].Deduplicated)
		require.True(t, got[1].Deduplicated)
		requireOneEffect(t, append(got, atOnce(t, 6, func() (*effects.Effect, error) { return enqueue(key) })...))
		requireOneEffect(t, atOnce(t, 6, func() (*effects.Effect, error) { return enqueue(key + "/new") }))
	}

	for _, tc := range []struct {
		name    string
		effects int // effects in the database at the end
		run     func(t *testing.T, h *harness)
	}{
		{"claimed", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "claim-1", func(key string) (*effects.Effect, error) { return h.client.Enqueue(ctx, spec(key), nil) })
		}},
		{"with its job", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "job-1", func(key string) (*effects.Effect, error) {
				return h.client.Enqueue(ctx, spec(key), &effects.EnqueueOpts{ScheduledAt: time.Now()})
			})
		}},
		{"held for confirmation", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "held-1", func(key string) (*effects.Effect, error) {
				s := spec(key)
				s.RequireConfirmation = true
				return h.client.Enqueue(ctx, s, nil)
			})
		}},
		{"batch", 3, func(t *testing.T, h *harness) {
			many := func() ([]*effects.Effect, error) {
				return h.client.EnqueueMany(ctx, []effects.Spec{spec("batch-1"), spec("batch-2"), spec("batch-1")}, nil)
			}
			first, err := many()
			require.NoError(t, err)
			require.False(t, first[0].Deduplicated)
			require.Equal(t, first[0].ID, first[2].ID, "one effect per key, within a batch too")
			second, err := many()
			require.NoError(t, err)
			require.True(t, second[0].Deduplicated && second[1].Deduplicated)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					_, err := h.client.EnqueueMany(ctx, []effects.Spec{spec("batch-3"), spec("batch-1")}, nil)
					require.NoError(t, err)
				})
			}
			wg.Wait()
		}},
		{"Do", 2, func(t *testing.T, h *harness) {
			twiceThenAtOnce(t, "do-1", func(key string) (*effects.Effect, error) { return h.client.Do(ctx, spec(key)) })
		}},
		{"compensation", 3, func(t *testing.T, h *harness) {
			original, err := h.client.Do(ctx, spec("undo-me"))
			require.NoError(t, err)
			require.Equal(t, effects.StateConfirmed, original.State)
			twiceThenAtOnce(t, "1", func(suffix string) (*effects.Effect, error) {
				return h.client.Compensate(ctx, original.ID, "test", "undo", &effects.CompensateOpts{KeySuffix: suffix})
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t)
			h.wire(fakebank.ConnectorOptions{StatusCheck: true, Compensate: true})
			tc.run(t, h)
			require.Equal(t, tc.effects, testkit.RequireRecordedOnce(t, h.pool))
		})
	}
}

func TestEnqueueRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	_, err := h.pool.Exec(context.Background(), `CREATE TABLE orders (id text PRIMARY KEY)`)
	require.NoError(t, err)

	errBusiness := errors.New("business rule failed")
	err = h.inTx(func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `INSERT INTO orders VALUES ('o-1')`); err != nil {
			return err
		}
		if _, err := h.client.EnqueueTx(context.Background(), tx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "o-1/charge",
			Args: map[string]any{"account": "a", "amount": 5}}, nil); err != nil {
			return err
		}
		return errBusiness
	})
	require.ErrorIs(t, err, errBusiness)
	time.Sleep(300 * time.Millisecond) // a reactor is running: give it the chance to (wrongly) see something
	require.Zero(t, h.count(`SELECT count(*) FROM orders`))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effect_transitions`))
	require.Zero(t, h.count(`SELECT count(*) FROM river_job`))
	require.Zero(t, h.bank.Calls("/wires"))

	// Committed together, both exist and the effect is dispatched.
	var effect *effects.Effect
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `INSERT INTO orders VALUES ('o-1')`); err != nil {
			return err
		}
		effect, err = h.client.EnqueueTx(context.Background(), tx, effects.Spec{Connector: "bank.wire", IdempotencyKey: "o-1/charge",
			Args: map[string]any{"account": "a", "amount": 5}}, nil)
		return err
	}))
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	h.start()
	ctx := context.Background()
	existing := h.enqueue("bank.wire", "batch-0", 1)

	var specs []effects.Spec
	for i := range 50 {
		specs = append(specs, effects.Spec{Connector: "bank.wire", Position: &effects.Position{TurnGroup: "tg-1", Decision: 3, CallIndex: i},
			Args: map[string]any{"account": "a", "amount": i + 1}, RunID: "run-9"})
	}
	specs = append(specs, effects.Spec{Connector: "bank.wire", IdempotencyKey: "batch-0", Args: map[string]any{"account": "acct-1", "amount": 1}})
	specs = append(specs, specs[0]) // the same effect twice in one batch
	var got []*effects.Effect
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		var err error
		got, err = h.client.EnqueueManyTx(ctx, tx, specs, nil)
		return err
	}))
	require.Len(t, got, 52)
	require.Equal(t, "tg-1/d-3/bank.wire/7", got[7].IdempotencyKey)
	require.Equal(t, "tg-1", got[7].TurnGroup)
	require.Equal(t, "run-9", got[7].RunID)
	require.True(t, got[50].Deduplicated)
	require.Equal(t, existing.ID, got[50].ID)
	require.Equal(t, got[0].ID, got[51].ID)
	for _, e := range append(got[:50:50], existing) { // the one enqueued before too: its call may still be under way
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
	}
	require.Equal(t, 51, len(h.bank.Ledger()))

	// A conflicting pair in one batch changes nothing.
	conflict := []effects.Spec{
		{Connector: "bank.wire", IdempotencyKey: "c", Args: map[string]any{"amount": 1}},
		{Connector: "bank.wire", IdempotencyKey: "c", Args: map[string]any{"amount": 2}},
	}
	err := h.inTx(func(tx pgx.Tx) error { _, err := h.client.EnqueueManyTx(ctx, tx, conflict, nil); return err })
	require.ErrorIs(t, err, effects.ErrIdempotencyConflict)
	require.Equal(t, 51, h.count(`SELECT count(*) FROM reckon_effects`))

	// List by run, paginated.
	page, next, err := h.client.List(ctx, effects.ListFilter{RunID: "run-9", State: effects.StateConfirmed, Limit: 30})
	require.NoError(t, err)
	require.Len(t, page, 30)
	require.NotNil(t, next)
	rest, next, err := h.client.List(ctx, effects.ListFilter{RunID: "run-9", Limit: 30, After: next})
	require.NoError(t, err)
	require.Len(t, rest, 20)
	require.Nil(t, next)
	_, _, err = h.client.List(ctx, effects.ListFilter{State: "DONE"})
	require.ErrorContains(t, err, `unknown state "DONE"`)
}

// TestEnqueueStoresAsyncOptions checks that a spec's async options are stored with its effect, by
// the single-row insert and by the batch one, where an effect named twice takes the options of
// the first of its specs that has any.
func TestEnqueueStoresAsyncOptions(t *testing.T) {
	t.Parallel()
	h := setupWired(t) // no reactor: the effects stay PENDING
	ctx := context.Background()
	spec := func(key string, timeout time.Duration, hard bool) effects.Spec {
		return effects.Spec{Connector: "bank.wire", IdempotencyKey: key, Args: map[string]any{"account": "a", "amount": 1},
			AsyncTimeout: timeout, AsyncHardTimeout: hard}
	}
	_, err := h.client.Enqueue(ctx, spec("one", time.Hour, true), nil)
	require.NoError(t, err)
	_, err = h.client.EnqueueMany(ctx, []effects.Spec{
		spec("timeout", 2*time.Hour, false), spec("none", 0, false), spec("twice", 0, false), spec("twice", 0, true),
	}, nil)
	require.NoError(t, err)
	_, err = h.client.EnqueueMany(ctx, []effects.Spec{spec("plain-1", 0, false), spec("plain-2", 0, false)}, nil)
	require.NoError(t, err)

	stored := map[string]string{}
	rows, err := h.pool.Query(ctx, `SELECT idempotency_key, coalesce(async_timeout_ms::text, 'NULL') || ' ' || async_hard_timeout FROM reckon_effects`)
	require.NoError(t, err)
	for rows.Next() {
		var key, options string
		require.NoError(t, rows.Scan(&key, &options))
		stored[key] = options
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{
		"one": "3600000 true", "timeout": "7200000 false", "none": "NULL false", "twice": "NULL true",
		"plain-1": "NULL false", "plain-2": "NULL false",
	}, stored)
	// No turn is NULL, in a batch as alone (a batch once stored the nil uuid).
	require.Zero(t, testkit.Count(t, h.pool, `SELECT count(*) FROM reckon_effects WHERE turn_id IS NOT NULL`))
}

func TestBadSpecsChangeNothing(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	for _, tc := range []struct {
		spec effects.Spec
		want string
	}{
		{effects.Spec{IdempotencyKey: "k"}, "spec needs a Connector"},
		{effects.Spec{Connector: "nope", IdempotencyKey: "k"}, `unknown connector "nope"`},
		{effects.Spec{Connector: "bank.wire"}, "needs an IdempotencyKey or a Position"},
		{effects.Spec{Connector: "bank.wire", IdempotencyKey: "k", Args: json.RawMessage(`{"a":`)}, "not valid JSON"},
		{effects.Spec{Connector: "bank.wire", IdempotencyKey: "k", Args: func() {}}, "json: unsupported type"},
		{effects.Spec{Connector: "bank.wire", Position: &effects.Position{Decision: 1}}, "Position needs a TurnGroup"},
		{effects.Spec{Connector: "bank.wire", IdempotencyKey: "k", MaxAttempts: -1}, "MaxAttempts must be positive"},
	} {
		_, err := h.client.Enqueue(ctx, tc.spec, nil)
		require.ErrorContains(t, err, tc.want)
	}
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_effects`))
	require.Zero(t, h.count(`SELECT count(*) FROM river_job`))
}

func TestRegistrationRefusesUnsafeConnectors(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil }
	status := func(context.Context, effects.Call) (effects.Status, error) { return effects.Absent(), nil }
	registry := effects.NewRegistry()

	err := registry.Register(effects.Connector{Name: "email.send", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Dispatch: noop})
	require.ErrorContains(t, err, `connector "email.send" is not retry safe`)
	require.ErrorContains(t, err, "give it a StatusCheck (best), a BusinessKey or a Compensate")
	// Empty tags are the most dangerous, not the safest.
	require.ErrorContains(t, registry.Register(effects.Connector{Name: "mystery", Dispatch: noop}), "not retry safe")
	// Destructive overrides idempotent.
	require.ErrorContains(t, registry.Register(effects.Connector{Name: "drop", Tags: []effects.Tag{effects.TagDestructive, effects.TagIdempotent}, Dispatch: noop}), "not retry safe")
	_, ok := registry.Get("email.send")
	require.False(t, ok, "a refused connector is not registered")

	require.NoError(t, registry.Register(effects.Connector{Name: "email.send", Tags: []effects.Tag{effects.TagWrite}, Dispatch: noop, StatusCheck: status}))
	require.NoError(t, registry.Register(effects.Connector{Name: "upsert", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Dispatch: noop}))
	require.NoError(t, registry.Register(effects.Connector{Name: "fire", Tags: []effects.Tag{effects.TagWrite}, Dispatch: noop, Unsafe: true}))
	require.ErrorContains(t, registry.Register(effects.Connector{Name: "upsert", Tags: []effects.Tag{effects.TagRead}, Dispatch: noop}), "already registered")
	require.ErrorContains(t, registry.Register(effects.Connector{Name: "x", Tags: []effects.Tag{"teleport"}, Dispatch: noop}), `unknown tag "teleport"`)
	require.ErrorContains(t, registry.Register(effects.Connector{Name: "y", Tags: []effects.Tag{effects.TagRead}}), "needs a Dispatch")
	require.ErrorContains(t, registry.Register(effects.Connector{Name: "z", Tags: []effects.Tag{effects.TagRead}, Dispatch: noop, Timeout: time.Hour}), "Timeout 1h0m0s out of range")
}

func TestPolicyAndPredicates(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil }
	undo := func(context.Context, effects.Call, effects.Original) (json.RawMessage, error) { return nil, nil }
	for _, tc := range []struct {
		tags            []effects.Tag
		compensate      bool
		retry, parallel bool
		policy          effects.Policy
	}{
		{nil, false, false, false, effects.PolicyIrreversible},
		{nil, true, false, false, effects.PolicyCompensatable},
		{[]effects.Tag{effects.TagRead, effects.TagNetwork}, false, true, true, effects.PolicyPure},
		{[]effects.Tag{effects.TagRead, effects.TagExternal}, false, true, true, effects.PolicyPure},
		{[]effects.Tag{effects.TagWrite, effects.TagIdempotent}, false, true, false, effects.PolicyIdempotent},
		{[]effects.Tag{effects.TagWrite, effects.TagIdempotent, effects.TagDestructive}, false, false, false, effects.PolicyIrreversible},
		{[]effects.Tag{effects.TagRead, effects.TagDestructive}, false, false, false, effects.PolicyIrreversible},
		{[]effects.Tag{effects.TagWrite, effects.TagExternal}, true, false, false, effects.PolicyCompensatable},
		{[]effects.Tag{effects.TagExternal}, false, false, false, effects.PolicyIrreversible},
	} {
		c := effects.Connector{Name: "c", Tags: tc.tags, Dispatch: noop}
		if tc.compensate {
			c.Compensate = undo
		}
		require.Equal(t, tc.retry, effects.RetrySafe(tc.tags), "retry %v", tc.tags)
		require.Equal(t, tc.parallel, effects.ParallelSafe(tc.tags), "parallel %v", tc.tags)
		require.Equal(t, tc.policy, effects.PolicyOf(&c), "policy %v compensate=%v", tc.tags, tc.compensate)
	}
}
