package effects_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// schemaPool opens a pool on the database of base whose connections use schema
// (db.ConfigureSchema), closed at the end of the test.
func schemaPool(t *testing.T, base *pgxpool.Pool, schema string) *pgxpool.Pool {
	t.Helper()
	config, err := pgxpool.ParseConfig(base.Config().ConnString())
	require.NoError(t, err)
	require.NoError(t, db.ConfigureSchema(config, schema))
	db.ConfigurePool(config)
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// Two deployments in two schemas of one database, migrated at once: each has its own tables and
// River queue, a reactor of one never sees, claims or dispatches the other's effects (the same
// connector name and idempotency key in both, calling different banks), and nothing lands in
// public.
func TestTwoSchemasInOneDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.NewEmptyDB(t)
	schemas := []string{"cell_a", "cell_b"}
	pools := map[string]*pgxpool.Pool{}
	var wg sync.WaitGroup
	errs := make([]error, len(schemas))
	for i, schema := range schemas {
		pools[schema] = schemaPool(t, base, schema)
		migrator, err := db.NewMigrator(pools[schema], &db.MigratorConfig{Schema: schema})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = migrator.Up(ctx)
		}()
	}
	wg.Wait()
	for i, schema := range schemas {
		require.NoError(t, errs[i], schema)
		var where string
		require.NoError(t, base.QueryRow(ctx, `SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = to_regclass($1)`,
			schema+".reckon_effects").Scan(&where))
		require.Equal(t, schema, where)
		require.Equal(t, 1, testkit.Count(t, base, `SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)`, schema+".river_job"))
	}
	require.Zero(t, testkit.Count(t, base, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`),
		"nothing is created in public")

	banks := map[string]*fakebank.Bank{}
	clients := map[string]*effects.Client{}
	for _, schema := range schemas {
		banks[schema] = fakebank.New(t)
		registry := effects.NewRegistry()
		registry.MustRegister(fakebank.ConnectorOptions{BaseURL: banks[schema].URL(), StatusCheck: true, Backoff: testkit.FastBackoff}.Connector())
		clients[schema] = testkit.NewClient(t, pools[schema], testkit.FastConfig(registry))
	}
	enqueue := func(schema, key string, opts *effects.EnqueueOpts) *effects.Effect {
		t.Helper()
		effect, err := clients[schema].Enqueue(ctx, effects.Spec{
			Connector: "bank.wire", IdempotencyKey: key, Args: map[string]any{"account": "acct-1", "amount": 5},
		}, opts)
		require.NoError(t, err)
		return effect
	}

	// Only cell_b's reactor runs. cell_a's effects, one left to the claimers and one with its job
	// inserted at once, wait, however long cell_b's reactor works.
	testkit.Start(t, clients["cell_b"])
	waitingClaim := enqueue("cell_a", "same-key", nil)
	waitingJob := enqueue("cell_a", "job-key", &effects.EnqueueOpts{ScheduledAt: time.Now()})
	inB := enqueue("cell_b", "same-key", nil)
	require.NotEqual(t, waitingClaim.ID, inB.ID, "one key, two schemas: two effects")
	require.Equal(t, effects.StateConfirmed, testkit.Wait(t, clients["cell_b"], inB.ID, 30*time.Second).State)
	lateInB := enqueue("cell_b", "late-key", &effects.EnqueueOpts{ScheduledAt: time.Now()})
	require.Equal(t, effects.StateConfirmed, testkit.Wait(t, clients["cell_b"], lateInB.ID, 30*time.Second).State)
	for _, id := range []any{waitingClaim.ID, waitingJob.ID} {
		require.Equal(t, 1, testkit.Count(t, pools["cell_a"], `SELECT count(*) FROM reckon_effects WHERE id = $1 AND state = 'PENDING' AND attempts = 0`, id))
	}
	require.Equal(t, 1, banks["cell_b"].Count("same-key"))
	require.Zero(t, banks["cell_b"].Count("job-key"), "cell_b's reactor dispatched an effect of cell_a")
	require.Empty(t, banks["cell_a"].Ledger())
	require.Zero(t, testkit.Count(t, pools["cell_b"], `SELECT count(*) FROM reckon_effects WHERE idempotency_key = 'job-key'`))

	// cell_a's reactor dispatches its own, and nothing of cell_b's twice.
	testkit.Start(t, clients["cell_a"])
	for _, effect := range []*effects.Effect{waitingClaim, waitingJob} {
		require.Equal(t, effects.StateConfirmed, testkit.Wait(t, clients["cell_a"], effect.ID, 30*time.Second).State)
	}
	require.Equal(t, 1, banks["cell_a"].Count("same-key"))
	require.Equal(t, 1, banks["cell_a"].Count("job-key"))
	require.Zero(t, banks["cell_a"].Count("late-key"))
	require.Equal(t, 1, banks["cell_b"].Count("same-key"))
	// Each reactor registered in its own schema only.
	for _, schema := range schemas {
		require.Equal(t, 1, testkit.Count(t, pools[schema], `SELECT count(*) FROM reckon_reactors`), schema)
	}
}

// A pool opened without ConfigureSchema is refused by a migrator of a schema rather than migrated
// into public; an invalid name is refused before anything runs.
func TestMigratorSchemaMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.NewEmptyDB(t)
	migrator, err := db.NewMigrator(base, &db.MigratorConfig{Schema: "cell_x"})
	require.NoError(t, err)
	_, err = migrator.Up(ctx)
	require.ErrorContains(t, err, "current schema is public")
	require.Zero(t, testkit.Count(t, base, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`))

	_, err = db.NewMigrator(base, &db.MigratorConfig{Schema: `x"; DROP TABLE y; --`})
	require.ErrorContains(t, err, "want lowercase letters")

	// Status of a schema not created yet: everything pending, nothing created.
	pool := schemaPool(t, base, "cell_y")
	migrator, err = db.NewMigrator(pool, &db.MigratorConfig{Schema: "cell_y"})
	require.NoError(t, err)
	status, err := migrator.Status(ctx)
	require.NoError(t, err)
	require.False(t, status.Current())
	require.Empty(t, status.Applied)
	require.Zero(t, testkit.Count(t, base, `SELECT count(*) FROM pg_namespace WHERE nspname = 'cell_y'`))
	_, err = migrator.Down(ctx, nil)
	require.ErrorContains(t, err, "schema cell_y does not exist")
}

// A Citus cell (MigratorConfig.Citus) needs a schema of its own and the citus extension: on a
// plain Postgres the migrator refuses before it makes anything.
func TestMigratorCitusRefusedWithoutCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.NewEmptyDB(t)
	_, err := db.NewMigrator(base, &db.MigratorConfig{Citus: true})
	require.ErrorContains(t, err, "a Citus cell needs a schema of its own")

	pool := schemaPool(t, base, "cell_z")
	migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Schema: "cell_z", Citus: true})
	require.NoError(t, err)
	_, err = migrator.Up(ctx)
	require.ErrorContains(t, err, "the database has no citus extension")
	require.Zero(t, testkit.Count(t, base, `SELECT count(*) FROM pg_namespace WHERE nspname IN ('cell_z', 'cell_z_river')`))
}
