package retention_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/retention"
)

// While another session holds the retention lock, a run ends at once with ErrBusy, touching
// nothing and recording nothing; once the lock is free it runs.
func TestBusy(t *testing.T) {
	t.Parallel()
	h := setup(t)
	id := h.effect(effect{settled: 40 * day})
	holder := h.holdLock()

	r := h.retention(0, func(c *retention.Config) { c.Registerer = h.metrics })
	report, err := r.Run(h.ctx, &retention.RunOpts{Actor: "test"})
	require.ErrorIs(t, err, retention.ErrBusy)
	require.Nil(t, report)
	require.True(t, h.exists("reckon_effects", id))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_retention_runs`))
	require.EqualValues(t, 1, testkit.Metric(t, h.metrics, "reckon_retention_runs_total", map[string]string{"result": "busy"}))

	_, err = holder.Exec(h.ctx, `SELECT pg_advisory_unlock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyRetention)
	require.NoError(t, err)
	h.run(r)
	require.False(t, h.exists("reckon_effects", id))
	// The run freed the lock.
	var free bool
	require.NoError(t, holder.QueryRow(h.ctx, `SELECT pg_try_advisory_lock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyRetention).Scan(&free))
	require.True(t, free)
}

// A run needs an actor that Postgres can store.
func TestRunNeedsActor(t *testing.T) {
	t.Parallel()
	h := setup(t)
	r := h.retention(0)
	for _, opts := range []*retention.RunOpts{nil, {}, {Actor: "cli:\x00"}} {
		_, err := r.Run(h.ctx, opts)
		require.ErrorContains(t, err, "Actor")
	}
}

// The retention lock is per schema: a run in one schema of a database (db.ConfigureSchema) does
// not make a run in another busy, and a run in a schema is kept from starting twice.
func TestLockPerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := pgtest.NewEmptyDB(t)
	pools := map[string]*pgxpool.Pool{}
	for _, schema := range []string{"cell_a", "cell_b"} {
		config, err := pgxpool.ParseConfig(base.Config().ConnString())
		require.NoError(t, err)
		require.NoError(t, db.ConfigureSchema(config, schema))
		pool, err := pgxpool.NewWithConfig(ctx, config)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Schema: schema})
		require.NoError(t, err)
		_, err = migrator.Up(ctx)
		require.NoError(t, err)
		pools[schema] = pool
	}
	newRetention := func(schema string) *retention.Retention {
		r, err := retention.New(pools[schema], &retention.Config{Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		return r
	}
	// A session of cell_a holds cell_a's lock, as a run there would.
	holder, err := pools["cell_a"].Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	var locked bool
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext('cell_a:' || $2::integer::text))`,
		db.AdvisoryLockNamespace, db.LockKeyRetention).Scan(&locked))
	require.True(t, locked)
	defer holder.Exec(ctx, `SELECT pg_advisory_unlock_all()`) //nolint:errcheck // the connection is released next

	_, err = newRetention("cell_a").Run(ctx, &retention.RunOpts{Actor: "test"})
	require.ErrorIs(t, err, retention.ErrBusy)
	_, err = newRetention("cell_b").Run(ctx, &retention.RunOpts{Actor: "test"})
	require.NoError(t, err, "cell_a's run does not hold cell_b's back")
	// Nor the legacy key of public.
	var free bool
	require.NoError(t, base.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2) AND pg_advisory_unlock($1, $2)`,
		db.AdvisoryLockNamespace, db.LockKeyRetention).Scan(&free))
	require.True(t, free)
}
