package reckontest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/reckontest"
)

func TestMain(m *testing.M) { reckontest.Main(m) }

// setup is a database, an upstream behind the connectors "bank.wire" and "bank.slow" (the same
// with a 1s timeout, for Hang) and a client that is not started.
func setup(t *testing.T) (*reckontest.Upstream, *effects.Client, func(opts *reckontest.DrainOpts)) {
	t.Helper()
	pool := reckontest.NewDB(t)
	bank := reckontest.NewUpstream(t)
	slow := bank.Definition("bank.slow")
	slow.Timeout = time.Second
	registry := effects.NewRegistry()
	registry.MustRegister(bank.Connector("bank.wire"))
	registry.MustRegister(slow.Connector(nil))
	client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry})
	return bank, client, func(opts *reckontest.DrainOpts) { reckontest.Drain(t, pool, client, opts) }
}

// enqueue enqueues an effect of key on bank.wire, or on bank.slow for a key that starts "slow-".
func enqueue(t *testing.T, client *effects.Client, key string) *effects.Effect {
	t.Helper()
	connector := "bank.wire"
	if strings.HasPrefix(key, "slow-") {
		connector = "bank.slow"
	}
	effect, err := client.Enqueue(context.Background(), effects.Spec{
		Connector: connector, IdempotencyKey: key, Args: map[string]any{"amount": 100},
	}, nil)
	require.NoError(t, err)
	return effect
}

// Each answer, through the connector of Definition, ends where the package documentation says,
// having performed what it says — Reckon's outcome table, end to end, in one Drain.
func TestAnswers(t *testing.T) {
	t.Parallel()
	bank, client, drain := setup(t)
	cases := []struct {
		key       string
		script    []reckontest.Answer
		status    []effects.Status
		want      effects.State
		path      []string
		performed int
	}{
		{"ok", nil, nil, effects.StateConfirmed, []string{">PENDING", "PENDING>CONFIRMED"}, 1},
		{"rejected", []reckontest.Answer{reckontest.Reject("no such account")}, nil, effects.StateFailed,
			[]string{">PENDING", "PENDING>FAILED"}, 0},
		{"busy", []reckontest.Answer{reckontest.Retryable(0)}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>CONFIRMED"}, 1},
		{"throttled", []reckontest.Answer{reckontest.Respond(429, "Retry-After", "0")}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>CONFIRMED"}, 1},
		{"conflict", []reckontest.Answer{reckontest.Respond(409)}, nil, effects.StateFailed,
			[]string{">PENDING", "PENDING>FAILED"}, 0},
		{"request-timeout", []reckontest.Answer{reckontest.Respond(408)}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, 1},
		{"error", []reckontest.Answer{reckontest.ServerError()}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, 1},
		{"dropped", []reckontest.Answer{reckontest.PerformThenDrop()}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, 1},
		{"slow-hung", []reckontest.Answer{reckontest.Hang()}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>PENDING", "PENDING>CONFIRMED"}, 1},
		{"slow-hung-after", []reckontest.Answer{reckontest.PerformThenHang()}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, 1},
		{"twice", []reckontest.Answer{reckontest.PerformThenDrop().Times(2)}, nil, effects.StateConfirmed,
			[]string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, 2},
		{"fog", []reckontest.Answer{reckontest.PerformThenDrop()},
			[]effects.Status{effects.Inconclusive("x"), effects.Inconclusive("x"), effects.Inconclusive("x"), effects.Inconclusive("x"), effects.Inconclusive("x")},
			effects.StateStuck, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK"}, 1},
		{"slow-lie", []reckontest.Answer{reckontest.Hang()}, []effects.Status{effects.Present(json.RawMessage(`{"said":"yes"}`))},
			effects.StateConfirmed, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, 0},
	}
	ids := map[string]uuid.UUID{}
	for _, tc := range cases {
		bank.Script(tc.key, tc.script...)
		bank.ScriptStatus(tc.key, tc.status...)
		ids[tc.key] = enqueue(t, client, tc.key).ID
	}
	drain(nil)

	for _, tc := range cases {
		effect := reckontest.RequireState(t, client, ids[tc.key], tc.want)
		require.Equal(t, tc.path, reckontest.Path(t, client, effect.ID), tc.key)
		require.Equal(t, tc.performed, bank.Performed(tc.key), tc.key)
	}
	// The duplicate is CONFIRMED with the first operation's result, and its extra operation undone
	// by a compensation of its own key, performed once.
	twice := reckontest.RequireState(t, client, ids["twice"], effects.StateConfirmed)
	var result struct{ ID, Key string }
	require.NoError(t, json.Unmarshal(twice.Result, &result))
	require.Equal(t, "twice", result.Key)
	require.True(t, strings.HasPrefix(result.ID, "op-"), result.ID)
	compensation := "twice/compensate-duplicate-2"
	require.Equal(t, 1, bank.Performed(compensation))
	lie := reckontest.RequireState(t, client, ids["slow-lie"], effects.StateConfirmed)
	require.JSONEq(t, `{"said":"yes"}`, string(lie.Result))
}

// The record: every call with its body and what was done; Next scripts calls of any key in
// arrival order after the keys' own scripts; SetDefault changes the rest; an idempotent upstream
// performs a key once however often it is called.
func TestRecordAndScripts(t *testing.T) {
	t.Parallel()
	bank, client, drain := setup(t)
	bank.Script("own", reckontest.Succeed(map[string]int{"n": 1}))
	bank.Next(reckontest.Reject("first"))
	bank.SetDefault(reckontest.Succeed(json.RawMessage(`{"default":true}`)))
	own := enqueue(t, client, "own")
	drain(nil)
	other := enqueue(t, client, "other")
	drain(nil)
	third := enqueue(t, client, "third")
	drain(nil)

	require.JSONEq(t, `{"n":1}`, string(reckontest.RequireState(t, client, own.ID, effects.StateConfirmed).Result),
		"the key's own script comes before Next")
	reckontest.RequireState(t, client, other.ID, effects.StateFailed)
	require.JSONEq(t, `{"default":true}`, string(reckontest.RequireState(t, client, third.ID, effects.StateConfirmed).Result))

	calls := bank.Calls()
	require.Len(t, calls, 3)
	first := calls[0]
	require.Equal(t, reckontest.OpDispatch, first.Op)
	require.Equal(t, "bank.wire", first.Connector)
	require.Equal(t, "own", first.Key)
	require.Equal(t, own.ID, first.EffectID)
	require.Equal(t, 1, first.Attempt)
	require.JSONEq(t, `{"amount":100}`, string(first.Args))
	require.Equal(t, "succeed", first.Answer)
	require.Equal(t, 1, first.Performed)
	require.NotEmpty(t, first.CorrelationID)
	require.Equal(t, "reject", calls[1].Answer)
	require.Zero(t, calls[1].Performed)
	require.Equal(t, 1, bank.Received("other"))
	require.Zero(t, bank.Performed("other"))

	// Idempotent: the second operation of a key is not performed, and answers the first result.
	bank.SetIdempotent(true)
	bank.Script("again", reckontest.PerformThenDrop(), reckontest.Succeed(json.RawMessage(`{"second":true}`)))
	bank.ScriptStatus("again", effects.Absent()) // a lie: the effect is dispatched again
	again := enqueue(t, client, "again")
	drain(nil)
	effect := reckontest.RequireState(t, client, again.ID, effects.StateConfirmed)
	require.Equal(t, 1, bank.Performed("again"))
	require.Equal(t, 2, bank.Received("again"))
	require.NotContains(t, string(effect.Result), "second", "the first operation's result")
}

// A compensation is a call of its own key that names the effect it undoes.
func TestCompensation(t *testing.T) {
	t.Parallel()
	bank, client, drain := setup(t)
	wire := enqueue(t, client, "w-1")
	drain(nil)
	reckontest.RequireState(t, client, wire.ID, effects.StateConfirmed)
	undo, err := client.Compensate(context.Background(), wire.ID, "test", "refund", nil)
	require.NoError(t, err)
	bank.Script(undo.IdempotencyKey, reckontest.Retryable(0)) // scripted by its own key
	drain(nil)
	reckontest.RequireState(t, client, undo.ID, effects.StateConfirmed)
	require.Equal(t, 1, bank.Performed(undo.IdempotencyKey))
	require.Equal(t, 2, bank.Received(undo.IdempotencyKey))
	calls := bank.Calls()
	last := calls[len(calls)-1]
	require.Equal(t, reckontest.OpCompensate, last.Op)
	require.Equal(t, wire.ID, last.Original)
	require.Equal(t, undo.ID, last.EffectID)
}

// Drain leaves what is not due before its timeout — an accepted effect awaiting its callback —
// and a later Drain takes up what came since.
func TestDrainLeavesWhatIsNotDue(t *testing.T) {
	t.Parallel()
	bank, client, drain := setup(t)
	bank.Script("render", reckontest.Accept())
	render := enqueue(t, client, "render")
	started := time.Now()
	drain(nil)
	require.Less(t, time.Since(started), 10*time.Second, "the callback's deadline (10m) was not waited for")
	awaiting := reckontest.RequireState(t, client, render.ID, effects.StatePending)
	require.Equal(t, 1, bank.Performed("render"))
	calls := bank.Calls()
	require.Equal(t, awaiting.CorrelationID, calls[0].CorrelationID)

	_, err := client.Callback(context.Background(), awaiting.CorrelationID, json.RawMessage(`{"url":"v.mp4"}`), "", nil)
	require.NoError(t, err)
	reckontest.RequireState(t, client, render.ID, effects.StateConfirmed)
	next := enqueue(t, client, "next")
	drain(nil)
	reckontest.RequireState(t, client, next.ID, effects.StateConfirmed)
}

// recorder stands in for a test that must fail: its Fatalf records the message, calls onFatal if
// set, and ends the goroutine, as testing's does.
type recorder struct {
	testing.TB
	onFatal func()
	mu      sync.Mutex
	fatal   string
	errors  []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	if r.onFatal != nil {
		r.onFatal()
	}
	runtime.Goexit()
}

// run calls fn with the recorder on a goroutine of its own and waits for it to end.
func (r *recorder) run(fn func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
}

// Work that was due and is not done when the timeout ends fails the test, naming it; the client
// is stopped all the same, and can be drained again.
func TestDrainFailsNamingWhatIsLeft(t *testing.T) {
	t.Parallel()
	pool := reckontest.NewDB(t)
	bank := reckontest.NewUpstream(t)
	bank.Script("stuck", reckontest.Hang())
	def := bank.Definition("bank.wire")
	def.Timeout = time.Minute // the call is in flight when Drain gives up, however slow the machine
	registry := effects.NewRegistry()
	registry.MustRegister(def.Connector(nil))
	client := reckontest.NewClient(t, pool, &effects.Config{Registry: registry})
	stuck := enqueue(t, client, "stuck")

	// Drain fails, then stops the client, which waits for the call in flight: closing the upstream
	// ends it (a dropped connection, an unknown outcome).
	r := &recorder{onFatal: bank.Close}
	r.run(func(tb testing.TB) {
		// Long enough for the call to be under way on a loaded machine (at 500 ms, CI once gave
		// up before it started; the closed upstream then refused it: nothing sent, FAILED).
		reckontest.Drain(tb, pool, client, &reckontest.DrainOpts{Timeout: 3 * time.Second})
	})
	require.Contains(t, r.fatal, "the work due was not done within 3s")
	require.Contains(t, r.fatal, "effect "+stuck.ID.String()+" PENDING bank.wire key=stuck attempts=")
	require.Empty(t, r.errors)

	// Drained again: the status check cannot reach the closed upstream, five times, so the effect
	// is STUCK for a person to decide.
	reckontest.Drain(t, pool, client, nil)
	reckontest.RequireState(t, client, stuck.ID, effects.StateStuck)
	reckontest.RequirePath(t, client, stuck.ID, ">PENDING", "PENDING>UNKNOWN", "UNKNOWN>STUCK")
}

// The assertions fail with what they found.
func TestAssertionsSayWhatTheyFound(t *testing.T) {
	t.Parallel()
	bank, client, drain := setup(t)
	bank.Script("no", reckontest.Reject("closed account"))
	effect := enqueue(t, client, "no")
	drain(nil)

	r := &recorder{}
	r.run(func(tb testing.TB) { reckontest.RequireState(tb, client, effect.ID, effects.StateConfirmed) })
	require.Contains(t, r.fatal, "is FAILED, want CONFIRMED")
	require.Contains(t, r.fatal, "closed account")
	require.Contains(t, r.fatal, "path >PENDING PENDING>FAILED")
	r.run(func(tb testing.TB) { reckontest.RequirePath(tb, client, effect.ID, ">PENDING", "PENDING>CONFIRMED") })
	require.Contains(t, r.fatal, "went >PENDING PENDING>FAILED, want >PENDING PENDING>CONFIRMED")
	r.run(func(tb testing.TB) { reckontest.RequireState(tb, client, uuid.New(), effects.StateConfirmed) })
	require.Contains(t, r.fatal, effects.ErrNotFound.Error())
}

// Each test's database is its own, migrated, and dropped when the test ends.
func TestNewDB(t *testing.T) {
	t.Parallel()
	var names []string
	for range 2 {
		t.Run("db", func(t *testing.T) {
			pool := reckontest.NewDB(t)
			var name string
			var effects int
			require.NoError(t, pool.QueryRow(context.Background(),
				`SELECT current_database(), (SELECT count(*) FROM reckon_effects) + (SELECT count(*) FROM river_job)`).Scan(&name, &effects))
			require.Zero(t, effects)
			names = append(names, name)
		})
	}
	if len(names) < 2 {
		t.Skip("no database (RECKON_TEST_SKIP_DB=1)")
	}
	require.NotEqual(t, names[0], names[1])
	info, err := pgtest.Server()
	require.NoError(t, err)
	admin, err := pgx.Connect(context.Background(), info.AdminURL)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	var left int
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left))
	require.Zero(t, left, "dropped when the test ended")
}
