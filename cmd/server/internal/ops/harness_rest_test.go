package ops_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/pgtest"
	"github.com/reckonhq/reckon/internal/reckontest"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// restEnv is a database with the clients an Ops reads and acts through, none started: effects
// enqueued stay PENDING (their jobs available) until a test moves them.
type restEnv struct {
	pool     *pgxpool.Pool
	registry *effects.Registry
	effects  *effects.Client
	sagas    *saga.Client
	turns    *turns.Client
	ops      *ops.Ops
}

// restConnector is the connector of restEnv's effects: a write whose outcomes a status check
// settles (never dispatched: the clients are not started).
const restConnector = "rest.write"

func newRestEnv(t *testing.T) *restEnv {
	t.Helper()
	pool := pgtest.NewDB(t)
	registry := effects.NewRegistry()
	registry.MustRegister(effects.Connector{
		Name: restConnector, Tags: []effects.Tag{effects.TagWrite, effects.TagExternal},
		Dispatch:    func(context.Context, effects.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
		StatusCheck: func(context.Context, effects.Call) (effects.Status, error) { return effects.Present(nil), nil },
		MaxAttempts: 3,
	})
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	sagas.MustRegister(saga.Definition{Name: "pay", Steps: []saga.Step{
		{Name: "reserve", Effect: restStep("reserve"), Undo: saga.UndoByConnector()},
		{Name: "charge", Effect: restStep("charge"), Undo: saga.UndoByConnector()},
		{Name: "ship", Effect: restStep("ship"), Undo: saga.NoUndo()},
	}})
	turnsClient, err := turns.NewClient(pool, &turns.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	config := reckontest.FastConfig(registry)
	config.Plugins = []effects.Plugin{sagas, turnsClient}
	client := reckontest.NewClient(t, pool, config)
	return &restEnv{pool: pool, registry: registry, effects: client, sagas: sagas, turns: turnsClient,
		ops: ops.New(pool, client, sagas, turnsClient)}
}

func restStep(name string) func(saga.Input) (effects.Spec, error) {
	return func(in saga.Input) (effects.Spec, error) {
		return effects.Spec{Connector: restConnector, Args: json.RawMessage(`{"step":"` + name + `"}`)}, nil
	}
}

// exec runs SQL that arranges a state the test needs.
func (e *restEnv) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := e.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// scopes: every tenant, acme alone, none.
var (
	allTenants = ops.Scope{}
	acmeOnly   = ops.Scope{Tenants: []string{"acme"}}
	noTenant   = ops.Scope{Tenants: []string{}}
)
