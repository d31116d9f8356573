package ops_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is a database of its own with the clients Ops reads and acts through, none started:
// effects stay where insertEffect puts them, or PENDING (their jobs available) until a test moves
// them. Every test of the package uses it.
type harness struct {
	pool     *pgxpool.Pool
	registry *effects.Registry
	effects  *effects.Client
	sagas    *saga.Client
	turns    *turns.Client
	ops      *ops.Ops
}

// The connectors of harness: a compensatable wire, an idempotent mail, and a write whose outcomes a
// status check settles, at most 3 attempts (the steps of the saga definition "pay").
const (
	connWire  = "bank.wire"
	connMail  = "mail.send"
	connWrite = "rest.write"
)

// Scopes: every tenant, acme alone, none.
var (
	allTenants = ops.Scope{}
	acmeOnly   = ops.Scope{Tenants: []string{"acme"}}
	noTenant   = ops.Scope{Tenants: []string{}}
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	pool := pgtest.NewDB(t)
	registry := effects.NewRegistry()
	ok := func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
	registry.MustRegister(effects.Connector{
		Name: connWire, Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Dispatch: ok,
		Compensate: func(context.Context, effects.Call, effects.Original) (json.RawMessage, error) {
			return json.RawMessage(`{}`), nil
		},
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) { return effects.Present(nil), nil },
	})
	registry.MustRegister(effects.Connector{Name: connMail, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Dispatch: ok})
	registry.MustRegister(effects.Connector{
		Name: connWrite, Tags: []effects.Tag{effects.TagWrite, effects.TagExternal}, Dispatch: ok,
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) { return effects.Present(nil), nil },
		MaxAttempts: 3,
	})
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	sagas.MustRegister(saga.Definition{Name: "pay", Steps: []saga.Step{
		{Name: "reserve", Effect: writeStep("reserve"), Undo: saga.UndoByConnector()},
		{Name: "charge", Effect: writeStep("charge"), Undo: saga.UndoByConnector()},
		{Name: "ship", Effect: writeStep("ship"), Undo: saga.NoUndo()},
	}})
	turnsClient, err := turns.NewClient(pool, &turns.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	config := testkit.FastConfig(registry)
	config.Plugins = []effects.Plugin{sagas, turnsClient}
	client := testkit.NewClient(t, pool, config)
	return &harness{pool: pool, registry: registry, effects: client, sagas: sagas, turns: turnsClient,
		ops: ops.New(pool, client, sagas, turnsClient)}
}

// writeStep is a step of "pay": an effect of connWrite.
func writeStep(name string) func(saga.Input) (effects.Spec, error) {
	return func(in saga.Input) (effects.Spec, error) {
		return effects.Spec{Connector: connWrite, Args: json.RawMessage(`{"step":"` + name + `"}`)}, nil
	}
}

// insertEffect enqueues an effect of tenant on connector under key (spec, when given, adjusts
// the rest) and moves it to state through legal transitions, with actor "test" — as a reactor
// would have: PENDING → UNKNOWN → STUCK, PENDING → CONFIRMED or FAILED.
func (h *harness) insertEffect(t *testing.T, tenant, connector, key string, state effects.State, spec ...func(*effects.Spec)) *effects.Effect {
	t.Helper()
	ctx := context.Background()
	s := effects.Spec{TenantID: tenant, Connector: connector, IdempotencyKey: key, Args: map[string]any{"key": key}}
	for _, f := range spec {
		f(&s)
	}
	e, err := h.effects.Enqueue(ctx, s, nil)
	require.NoError(t, err)
	path := map[effects.State][]effects.State{
		effects.StatePending: nil, effects.StateConfirmed: {effects.StateConfirmed}, effects.StateFailed: {effects.StateFailed},
		effects.StateUnknown: {effects.StateUnknown}, effects.StateStuck: {effects.StateUnknown, effects.StateStuck},
	}[state]
	for _, to := range path {
		h.exec(t, `UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'moved by the test',
			transition_detail = '{"upstream": "said so"}' WHERE id = $1`, e.ID, string(to))
	}
	e, err = h.effects.Get(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, state, e.State)
	return e
}

// exec runs sql on the harness's database.
func (h *harness) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := h.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// ids are the ids of effects, in order.
func ids(list []*effects.Effect) []uuid.UUID {
	out := make([]uuid.UUID, len(list))
	for i, e := range list {
		out[i] = e.ID
	}
	return out
}
