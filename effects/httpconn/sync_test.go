package httpconn_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// TestSync: stored connectors are registered, changed ones replaced, deleted ones unregistered, a
// Go connector of the same name wins, and an unchanged store changes nothing.
func TestSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	registry := effects.NewRegistry()
	var syncer httpconn.Syncer // the registry's, for its lifetime
	goConnector := effects.Connector{Name: "go.only", Tags: []effects.Tag{effects.TagRead},
		Dispatch: func(context.Context, effects.Call) (json.RawMessage, error) { return nil, nil }}
	require.NoError(t, registry.Register(goConnector))

	res, err := syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.False(t, res.Changed())

	def := definition("http://127.0.0.1:1")
	_, _, err = httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	_, _, err = httpconn.Put(ctx, pool, httpconn.Definition{Name: "go.only", Tags: []effects.Tag{effects.TagRead}, DispatchURL: "http://127.0.0.1:1/x"})
	require.NoError(t, err)

	res, err = syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.Equal(t, []string{"bank.wire"}, res.Added)
	require.Contains(t, res.Skipped, "go.only")
	require.ErrorContains(t, res.Skipped["go.only"], "already registered")
	connector, ok := registry.Get("bank.wire")
	require.True(t, ok)
	require.Equal(t, 5, connector.MaxAttempts)
	require.NotNil(t, connector.StatusCheck)
	goGot, _ := registry.Get("go.only")
	require.Nil(t, goGot.StatusCheck)
	require.Equal(t, 5, goGot.MaxAttempts) // untouched Go connector (its own defaults)

	res, err = syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.False(t, res.Changed(), "nothing changed in the store")

	def.MaxAttempts, def.StatusURL = 2, ""
	_, _, err = httpconn.Put(ctx, pool, def)
	require.NoError(t, err)
	res, err = syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.Equal(t, []string{"bank.wire"}, res.Updated)
	connector, _ = registry.Get("bank.wire")
	require.Equal(t, 2, connector.MaxAttempts)
	require.Nil(t, connector.StatusCheck)

	require.NoError(t, httpconn.Delete(ctx, pool, "bank.wire"))
	require.NoError(t, httpconn.Delete(ctx, pool, "go.only"))
	res, err = syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)
	require.Equal(t, []string{"bank.wire"}, res.Removed)
	_, ok = registry.Get("bank.wire")
	require.False(t, ok)
	_, ok = registry.Get("go.only")
	require.True(t, ok, "the Go connector is never removed by Sync")
}

// TestSyncDatabaseDown: when the store cannot be read the registry keeps what it had.
func TestSyncDatabaseDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	registry := effects.NewRegistry()
	var syncer httpconn.Syncer // the registry's, for its lifetime
	_, _, err := httpconn.Put(ctx, pool, definition("http://127.0.0.1:1"))
	require.NoError(t, err)
	_, err = syncer.Sync(ctx, pool, registry)
	require.NoError(t, err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = syncer.Sync(cancelled, pool, registry)
	require.Error(t, err)
	_, ok := registry.Get("bank.wire")
	require.True(t, ok)
}
