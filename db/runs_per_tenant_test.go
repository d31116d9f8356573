package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// runsPerTenant is the migration that scopes run ids per tenant.
const runsPerTenant = 13

// TestMigrateRunsPerTenant: 0013_runs_per_tenant applies on a database that has runs and effects
// in runs, which keep working under the per-tenant queries; afterwards two tenants may use one run
// id. Going down refuses, changing nothing, while a run id is used by two tenants (by their runs or
// only by their effects), and works once none is.
func TestMigrateRunsPerTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, migrator := migrated(t)
	// Back to the schema before 0013 (and whatever came after it and is still applied: a refused
	// Down has rolled back the migrations after 0013 already).
	down := func() error {
		status, err := migrator.Status(ctx)
		if err != nil {
			return err
		}
		newer := 0
		for _, m := range status.Applied {
			if m.Version >= runsPerTenant {
				newer++
			}
		}
		_, err = migrator.Down(ctx, &db.DownOpts{Steps: newer})
		return err
	}
	require.NoError(t, down())
	require.Equal(t, "PRIMARY KEY (id)", primaryKey(t, pool, "reckon_runs"))

	// Runs as global ids made them: each id once, its effects all of its tenant.
	exec(t, pool, `INSERT INTO reckon_runs (id, tenant_id, max_steps) VALUES ('run-a', 'acme', 5), ('run-b', 'globex', NULL)`)
	effect := func(tenant, key, run string) {
		t.Helper()
		exec(t, pool, `INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, run_id, transition_actor, transition_reason)
			VALUES ($1, $2, 'bank.wire', $3, 'idempotent', $4, 'test', 'seeded')`, uuid.New(), tenant, key, run)
	}
	effect("acme", "a-1", "run-a")
	effect("acme", "a-2", "run-a")
	effect("globex", "b-1", "run-b")

	_, err := migrator.Up(ctx)
	require.NoError(t, err)
	require.Equal(t, "PRIMARY KEY (tenant_id, id)", primaryKey(t, pool, "reckon_runs"))
	require.Contains(t, indexDef(t, pool, "reckon_effects_run_idx"), "(tenant_id, run_id) WHERE (run_id IS NOT NULL)")
	q := dbsqlc.New(pool)
	run, err := q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: "acme", ID: "run-a"})
	require.NoError(t, err, "an existing run keeps working")
	require.Equal(t, int32(5), *run.MaxSteps)
	stats, err := q.RunStats(ctx, dbsqlc.RunStatsParams{TenantID: "acme", RunID: "run-a"})
	require.NoError(t, err)
	require.Equal(t, int32(2), stats.Steps)
	_, err = q.RunGet(ctx, dbsqlc.RunGetParams{TenantID: "globex", ID: "run-a"})
	require.ErrorIs(t, err, pgx.ErrNoRows, "no run of globex's is named run-a yet")

	// globex's own run-a, next to acme's.
	locked, err := q.RunLockForEnqueue(ctx, dbsqlc.RunLockForEnqueueParams{TenantID: "globex", ID: "run-a"})
	require.NoError(t, err)
	require.Nil(t, locked.MaxSteps, "a run of its own, without acme's guardrail")
	effect("globex", "b-2", "run-a")
	stats, err = q.RunStats(ctx, dbsqlc.RunStatsParams{TenantID: "acme", RunID: "run-a"})
	require.NoError(t, err)
	require.Equal(t, int32(2), stats.Steps, "globex's effect is not acme's step")

	// Down refuses while run-a is both tenants'.
	err = down()
	require.ErrorContains(t, err, "run id run-a is used by more than one tenant")
	require.Equal(t, "PRIMARY KEY (tenant_id, id)", primaryKey(t, pool, "reckon_runs"), "nothing changed")
	exec(t, pool, `DELETE FROM reckon_runs WHERE tenant_id = 'globex' AND id = 'run-a'`)
	err = down()
	require.ErrorContains(t, err, "run id run-a is used by more than one tenant", "globex's effects still name run-a")
	exec(t, pool, `UPDATE reckon_effects SET run_id = 'run-b' WHERE tenant_id = 'globex'`)
	require.NoError(t, down())
	require.Equal(t, "PRIMARY KEY (id)", primaryKey(t, pool, "reckon_runs"))
	require.Contains(t, indexDef(t, pool, "reckon_effects_run_idx"), "(run_id) WHERE (run_id IS NOT NULL)")
	var runs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_runs`).Scan(&runs))
	require.Equal(t, 2, runs)
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// queryAll returns the first column of every row sql returns.
func queryAll[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []T {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	require.NoError(t, err)
	return out
}

func primaryKey(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	var def string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'`, table).Scan(&def))
	return def
}

func indexDef(t *testing.T, pool *pgxpool.Pool, index string) string {
	t.Helper()
	var def string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes WHERE indexname = $1`, index).Scan(&def))
	return def
}
