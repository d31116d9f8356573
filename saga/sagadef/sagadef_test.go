package sagadef_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/reckontest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

func TestMain(m *testing.M) { reckontest.Main(m) }

// recorder is a Go connector that confirms every call and records its args.
type recorder struct {
	mu    sync.Mutex
	calls map[string]sagadef.Args // by idempotency key
}

func (r *recorder) connector(name string) effects.Connector {
	return effects.Connector{
		Name: name, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
		Dispatch: func(_ context.Context, call effects.Call) (json.RawMessage, error) {
			var args sagadef.Args
			if err := json.Unmarshal(call.Args, &args); err != nil {
				return nil, effects.Permanent(err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.calls[call.IdempotencyKey] = args
			return json.RawMessage(`{"noted":"` + call.IdempotencyKey + `"}`), nil
		},
	}
}

func (r *recorder) args(key string) (sagadef.Args, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.calls[key]
	return a, ok
}

func registryWith(t *testing.T, names ...string) *effects.Registry {
	t.Helper()
	registry := effects.NewRegistry()
	rec := &recorder{calls: map[string]sagadef.Args{}}
	for _, name := range names {
		require.NoError(t, registry.Register(rec.connector(name)))
	}
	return registry
}

func TestValidate(t *testing.T) {
	t.Parallel()
	registry := registryWith(t, "note", "undo.note")
	require.NoError(t, registry.Register(reckontest.NewUpstream(t).Connector("bank.wire")))

	good := `{"name":"transfer","steps":[
		{"name":"debit","connector":"bank.wire","undo":"connector"},
		{"name":"note","connector":"note","undo":{"connector":"undo.note"}},
		{"name":"done","connector":"note","undo":"none"}]}`
	def, err := sagadef.Parse([]byte(good))
	require.NoError(t, err)
	require.NoError(t, def.Validate(registry))
	require.Equal(t, sagadef.Undo{Kind: sagadef.UndoEffect, Connector: "undo.note"}, def.Steps[1].Undo)
	round, err := json.Marshal(def)
	require.NoError(t, err)
	again, err := sagadef.Parse(round)
	require.NoError(t, err)
	require.Equal(t, def, again, "the JSON form round-trips")

	for _, tc := range []struct{ body, want string }{
		{`{"name":"x","steps":[]}`, "at least one"},
		{`{"name":"","steps":[{"name":"a","connector":"note","undo":"none"}]}`, "name is required"},
		{`{"name":"bad name","steps":[{"name":"a","connector":"note","undo":"none"}]}`, `name "bad name"`},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":"none"},{"name":"a","connector":"note","undo":"none"}]}`, "unique"},
		{`{"name":"x","steps":[{"name":"a","connector":"note"}]}`, "steps[0].undo is required"},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":"maybe"}]}`, "undo: want"},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":{"connector":"u","extra":1}}]}`, "undo: want"},
		{`{"name":"x","steps":[{"name":"a","undo":"none"}]}`, "steps[0].connector is required"},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":{"connector":""}}]}`, "steps[0].undo.connector is required"},
		{`{"name":"x","compensation_attempts":-1,"steps":[{"name":"a","connector":"note","undo":"none"}]}`, "compensation_attempts"},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":"none"}],"surprise":true}`, "unknown field"},
		{`{"name":"x"`, "invalid definition"},
	} {
		_, err := sagadef.Parse([]byte(tc.body))
		require.ErrorIs(t, err, sagadef.ErrInvalid, tc.body)
		require.ErrorContains(t, err, tc.want, tc.body)
	}

	// With a registry: connectors must exist, and "connector" undo needs a Compensate.
	for _, tc := range []struct{ body, want string }{
		{`{"name":"x","steps":[{"name":"a","connector":"nowhere","undo":"none"}]}`, `steps[0].connector "nowhere" is not registered`},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":"connector"}]}`, `connector "note" cannot compensate`},
		{`{"name":"x","steps":[{"name":"a","connector":"note","undo":{"connector":"gone"}}]}`, `steps[0].undo.connector "gone" is not registered`},
	} {
		def, err := sagadef.Parse([]byte(tc.body))
		require.NoError(t, err, "well formed")
		err = def.Validate(registry)
		require.ErrorIs(t, err, sagadef.ErrInvalid, tc.body)
		require.ErrorContains(t, err, tc.want, tc.body)
	}
	// Every problem is reported at once.
	def = sagadef.Definition{Name: "x", Steps: []sagadef.Step{{Name: "a", Connector: "nowhere", Undo: sagadef.Undo{Kind: sagadef.UndoConnector}}, {Name: "a", Connector: "note"}}}
	err = def.Validate(registry)
	require.ErrorContains(t, err, `"nowhere" is not registered`)
	require.ErrorContains(t, err, "unique")
	require.ErrorContains(t, err, "steps[1].undo is required")
}

// stepsOf is a definition of n steps, named step0… when distinct, else all "same".
func stepsOf(n int, distinct bool) sagadef.Definition {
	def := sagadef.Definition{Name: "long", Steps: make([]sagadef.Step, n)}
	for i := range def.Steps {
		name := "same"
		if distinct {
			name = "step" + strconv.Itoa(i)
		}
		def.Steps[i] = sagadef.Step{Name: name, Connector: "note", Undo: sagadef.Undo{Kind: sagadef.UndoNone}}
	}
	return def
}

// TestValidateRefusesTooManySteps: a definition over MaxSteps is refused by its number of steps,
// naming the field, in a short message: its steps are not checked (nor reported) one by one, so
// 100,000 steps with one name are one problem, not 99,999. A body of 1 MiB of steps is refused the
// same way.
func TestValidateRefusesTooManySteps(t *testing.T) {
	t.Parallel()
	registry := registryWith(t, "note")
	require.NoError(t, stepsOf(sagadef.MaxSteps, true).Validate(registry))
	err := stepsOf(sagadef.MaxSteps, false).Validate(registry)
	require.ErrorContains(t, err, `steps[1].name "same": step names must be unique`, "at the bound, steps are checked")

	for _, distinct := range []bool{true, false} {
		err := stepsOf(100_000, distinct).Validate(registry)
		require.ErrorIs(t, err, sagadef.ErrInvalid)
		require.ErrorContains(t, err, "steps: 100000, at most 100")
		require.Less(t, len(err.Error()), 200, "one problem, not one per step")
	}

	step := `{"name":"a","connector":"note","undo":"none"},`
	n := (1<<20 - 100) / len(step)
	body := `{"name":"long","steps":[` + strings.Repeat(step, n-1) + strings.TrimSuffix(step, ",") + `]}`
	_, err = sagadef.Parse([]byte(body))
	require.ErrorIs(t, err, sagadef.ErrInvalid)
	require.ErrorContains(t, err, fmt.Sprintf("steps: %d, at most 100", n))
	require.Less(t, len(err.Error()), 200)
}

// BenchmarkValidateSteps: validating a definition is linear in its steps (names are checked for
// repeats with a set), and a definition over MaxSteps is refused by its length: steps=100000
// costs less than steps=10 (its steps are not walked).
func BenchmarkValidateSteps(b *testing.B) {
	registry := effects.NewRegistry()
	rec := &recorder{calls: map[string]sagadef.Args{}}
	require.NoError(b, registry.Register(rec.connector("note")))
	for _, n := range []int{10, sagadef.MaxSteps, 100_000} {
		def := stepsOf(n, true)
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			for b.Loop() {
				_ = def.Validate(registry)
			}
		})
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := reckontest.NewDB(t)
	registry := registryWith(t, "note", "undo.note")
	def := sagadef.Definition{Name: "audit", Steps: []sagadef.Step{
		{Name: "one", Connector: "note", Undo: sagadef.Undo{Kind: sagadef.UndoEffect, Connector: "undo.note"}},
		{Name: "two", Connector: "note", Undo: sagadef.Undo{Kind: sagadef.UndoNone}},
	}, CompensationAttempts: 3}

	stored, created, err := sagadef.Put(ctx, pool, def, registry)
	require.NoError(t, err)
	require.True(t, created)
	require.False(t, stored.CreatedAt.IsZero())
	_, created, err = sagadef.Put(ctx, pool, def, registry)
	require.NoError(t, err)
	require.False(t, created, "the same definition again is a no-op")

	changed := def
	changed.Steps = def.Steps[:1]
	_, _, err = sagadef.Put(ctx, pool, changed, registry)
	require.ErrorIs(t, err, sagadef.ErrExists)
	_, _, err = sagadef.Put(ctx, pool, sagadef.Definition{Name: "bad", Steps: []sagadef.Step{{Name: "a", Connector: "missing", Undo: sagadef.Undo{Kind: sagadef.UndoNone}}}}, registry)
	require.ErrorIs(t, err, sagadef.ErrInvalid)

	got, err := sagadef.Get(ctx, pool, "audit")
	require.NoError(t, err)
	require.Equal(t, stored, got)
	require.Equal(t, def.Steps, got.Steps, "unchanged by the refused replacement")
	require.Equal(t, 3, got.CompensationAttempts)
	_, err = sagadef.Get(ctx, pool, "bad")
	require.ErrorIs(t, err, sagadef.ErrNotFound, "the invalid one was not stored")
	list, err := sagadef.List(ctx, pool)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// bankHarness is a database with a scripted upstream, the bank, behind an HTTP connector
// ("bank.wire", which can compensate), and two Go connectors recording their args ("note",
// "undo.note").
type bankHarness struct {
	pool     *pgxpool.Pool
	bank     *reckontest.Upstream
	registry *effects.Registry
	rec      *recorder
}

func setupBank(t *testing.T) *bankHarness {
	t.Helper()
	ctx := context.Background()
	h := &bankHarness{pool: reckontest.NewDB(t), bank: reckontest.NewUpstream(t), rec: &recorder{calls: map[string]sagadef.Args{}}}
	def := h.bank.Definition("bank.wire")
	def.Tags = []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork}
	def.Timeout, def.BackoffInitial = time.Second, 20*time.Millisecond
	_, _, err := httpconn.Put(ctx, h.pool, def)
	require.NoError(t, err)
	h.registry = effects.NewRegistry()
	for _, name := range []string{"note", "undo.note"} {
		require.NoError(t, h.registry.Register(h.rec.connector(name)))
	}
	_, err = new(httpconn.Syncer).Sync(ctx, h.pool, h.registry)
	require.NoError(t, err)
	return h
}

// sagaClient returns a saga client on a new effects client of the harness's registry, with
// stored definitions installed (loaded when named), started when start is set.
func (h *bankHarness) sagaClient(t *testing.T, start bool) *saga.Client {
	t.Helper()
	var syncer sagadef.Syncer // the client's
	sagas, err := saga.NewClient(h.pool, &saga.Config{Logger: slog.New(slog.DiscardHandler), OnUnknownDefinition: syncer.Load})
	require.NoError(t, err)
	client := reckontest.NewClient(t, h.pool, &effects.Config{Registry: h.registry, Workers: 10, Plugins: []effects.Plugin{sagas}})
	if start {
		require.NoError(t, client.Start(context.Background()))
	}
	return sagas
}

// TestSagasOfStoredDefinitions runs sagas of a stored definition through a real HTTP connector
// (the fake bank) and Go connectors. The definition is loaded on demand both where the saga
// starts (a client that never runs a reactor) and by the reactor advancing it. Steps get
// {"input","results"}; a saga whose last step the bank rejects is compensated in reverse order —
// the note by its compensating effect, the debit by the bank's compensation — and the bank's
// ledger nets to zero.
func TestSagasOfStoredDefinitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setupBank(t)
	def, err := sagadef.Parse([]byte(`{"name":"transfer","steps":[
		{"name":"debit","connector":"bank.wire","undo":"connector"},
		{"name":"note","connector":"note","undo":{"connector":"undo.note"}},
		{"name":"credit","connector":"bank.wire","undo":"none"}]}`))
	require.NoError(t, err)
	_, _, err = sagadef.Put(ctx, h.pool, def, h.registry)
	require.NoError(t, err)

	starter := h.sagaClient(t, false) // like cmd/server
	reactor := h.sagaClient(t, true)  // like cmd/reactor
	require.False(t, starter.Registered("transfer"))

	input := json.RawMessage(`{"account":"a-1","amount":40}`)
	ok, err := starter.Start(ctx, "transfer", input, &saga.StartOpts{TenantID: "acme"})
	require.NoError(t, err, "loaded on demand where the saga starts")
	require.True(t, starter.Registered("transfer"))

	// The failing one: the bank rejects its last step (scripted before the start commits).
	var failing *saga.Saga
	require.NoError(t, pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		var err error
		failing, err = starter.StartTx(ctx, tx, "transfer", json.RawMessage(`{"account":"a-2","amount":25}`), &saga.StartOpts{TenantID: "acme"})
		h.bank.Script(saga.StepKey(failing.ID, 2), reckontest.Reject("account closed"))
		return err
	}))

	wait := func(id saga.Saga) *saga.Saga {
		waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		s, err := reactor.Wait(waitCtx, id.ID)
		require.NoError(t, err)
		return s
	}
	done := wait(*ok)
	require.Equal(t, saga.StateCompleted, done.State, "%+v", done)
	require.True(t, reactor.Registered("transfer"), "loaded on demand by the reactor's settle hook")

	// The note saw the input and the debit's result by name; the credit too.
	noted, found := h.rec.args(saga.StepKey(ok.ID, 1))
	require.True(t, found)
	require.JSONEq(t, string(input), string(noted.Input))
	require.Len(t, noted.Results, 1)
	var wire struct{ ID, Key string } // the bank's result
	require.NoError(t, json.Unmarshal(noted.Results["debit"], &wire))
	require.Equal(t, saga.StepKey(ok.ID, 0), wire.Key)
	require.NotEmpty(t, wire.ID)
	// The bank's step got the input under "input", through the HTTP connector.
	for _, call := range h.bank.Calls() {
		if call.Key == saga.StepKey(ok.ID, 0) {
			var args sagadef.Args
			require.NoError(t, json.Unmarshal(call.Args, &args))
			require.JSONEq(t, string(input), string(args.Input))
		}
	}
	require.JSONEq(t, `{"noted":"`+saga.StepKey(ok.ID, 1)+`"}`, string(done.Steps[1].Result))
	require.Equal(t, 1, h.bank.Performed(saga.StepKey(ok.ID, 0)))
	require.Equal(t, 1, h.bank.Performed(saga.StepKey(ok.ID, 2)))

	undone := wait(*failing)
	require.Equal(t, saga.StateCompensated, undone.State, "%+v", undone)
	require.Equal(t, saga.StepCompensated, undone.Steps[0].State)
	require.Equal(t, saga.StepCompensated, undone.Steps[1].State)
	require.Equal(t, saga.StepFailed, undone.Steps[2].State)
	comp, found := h.rec.args(saga.CompensationKey(failing.ID, 1, 1, false))
	require.True(t, found, "the note was undone by undo.note")
	require.Equal(t, "note", comp.Compensates)
	require.Contains(t, comp.Results, "debit")
	require.Contains(t, comp.Results, "note", "a compensation sees the undone step's own result")
	require.Equal(t, 1, h.bank.Performed(saga.StepKey(failing.ID, 0)), "the debit was performed")
	require.Equal(t, 1, h.bank.Performed(saga.CompensationKey(failing.ID, 0, 1, true)), "and reversed by the bank's compensation")
	require.Zero(t, h.bank.Performed(saga.StepKey(failing.ID, 2)), "the rejected credit performed nothing")
}

// TestSyncSkipsGoDefinitions: a stored definition whose name a Go definition holds is skipped and
// reported; the others are registered once.
func TestSyncSkipsGoDefinitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setupBank(t)
	sagas := h.sagaClient(t, false)
	sagas.MustRegister(saga.Definition{Name: "go-owned", Steps: []saga.Step{{
		Name: "a", Effect: func(saga.Input) (effects.Spec, error) { return effects.Spec{Connector: "note"}, nil }, Undo: saga.NoUndo(),
	}}})
	for _, name := range []string{"go-owned", "stored"} {
		_, _, err := sagadef.Put(ctx, h.pool, sagadef.Definition{Name: name, Steps: []sagadef.Step{{Name: "a", Connector: "note", Undo: sagadef.Undo{Kind: sagadef.UndoNone}}}}, h.registry)
		require.NoError(t, err)
	}
	var syncer sagadef.Syncer
	res, err := syncer.Sync(ctx, h.pool, sagas)
	require.NoError(t, err)
	require.Equal(t, []string{"stored"}, res.Added)
	require.Contains(t, res.Skipped, "go-owned")
	require.ErrorContains(t, res.Skipped["go-owned"], "Go definitions take precedence")
	res, err = syncer.Sync(ctx, h.pool, sagas)
	require.NoError(t, err)
	require.Empty(t, res.Added, "registered once")
}
