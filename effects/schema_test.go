package effects_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// On a database nobody migrated, the client is built (NewClient does no I/O), but an enqueue and
// Start fail with ErrSchemaNotCurrent, which says to run db.Migrate; once migrated, both work.
func TestUnmigratedDatabaseSaysToMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyDB(t)
	bank := fakebank.New(t)
	registry := effects.NewRegistry()
	registry.MustRegister(fakebank.ConnectorOptions{BaseURL: bank.URL(), StatusCheck: true, Compensate: true, Timeout: time.Second}.Connector())
	client, err := effects.NewClient(pool, testkit.FastConfig(registry))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, client.Stop(context.Background())) })
	spec := effects.Spec{Connector: "bank.wire", IdempotencyKey: "fresh-1", Args: map[string]any{"account": "a", "amount": 1}}

	_, err = client.Enqueue(ctx, spec, nil)
	require.ErrorIs(t, err, effects.ErrSchemaNotCurrent)
	require.ErrorContains(t, err, "run db.Migrate")
	err = client.Start(ctx)
	require.ErrorIs(t, err, effects.ErrSchemaNotCurrent)
	require.ErrorContains(t, err, "migrations pending")

	require.NoError(t, db.Migrate(ctx, pool, slog.New(slog.DiscardHandler)))
	require.NoError(t, client.Start(ctx))
	effect, err := client.Enqueue(ctx, spec, nil)
	require.NoError(t, err)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done, err := client.Wait(waitCtx, effect.ID)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, done.State)
}
