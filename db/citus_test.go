//go:build citus

// The Citus checks need a Citus cluster: `eval "$(../shared/ci/citus-env)"`, then
// `go test -tags citus -run Citus ./db/`. They are not part of the default test run.

package db_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
)

// generatedQueryRE finds a query of internal/dbsqlc: `const name = "-- name: Name :kind\n…"`.
var generatedQueryRE = regexp.MustCompile("(?s)const \\w+ = `-- name: (\\w+) :\\w+\n(.*?)`")

// citusPlanQueries returns every query of internal/dbsqlc by name, or of the sqlc-generated files
// RECKON_CITUS_QUERY_FILES names (a glob: River's own queries, say, in riverpgxv5's
// internal/dbsqlc; River's "/* TEMPLATE: schema */" prefix is dropped).
func citusPlanQueries(t *testing.T) map[string]string {
	t.Helper()
	glob := "../internal/dbsqlc/*.sql.go"
	if v := os.Getenv("RECKON_CITUS_QUERY_FILES"); v != "" {
		glob = v
	}
	files, err := filepath.Glob(glob)
	require.NoError(t, err)
	require.NotEmpty(t, files)
	queries := map[string]string{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		// sqlc writes a backtick inside a query (in its comments) as "` + "`" + `": a space will do.
		text := strings.ReplaceAll(string(src), "` + \"`\" + `", " ")
		for _, match := range generatedQueryRE.FindAllStringSubmatch(text, -1) {
			queries[match[1]] = strings.ReplaceAll(match[2], "/* TEMPLATE: schema */", "")
		}
	}
	return queries
}

// TestCitusPlansEveryQuery migrates a schema on the Citus coordinator RECKON_CITUS_URL names,
// distributes it (citus_schema_distribute), and has Citus plan every query of internal/dbsqlc
// (EXPLAIN of the prepared statement with NULL arguments: planning, not running), listing those
// it refuses. It fails without RECKON_CITUS_URL. The queries Citus still refuses are listed in
// citusRefused: the test fails when another one is refused, and when a listed one plans (take
// it off the list).
func TestCitusPlansEveryQuery(t *testing.T) {
	ctx := context.Background()
	pool, schema := citusSchema(t, "citus_check", false)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET citus.enable_unsafe_triggers = on`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT citus_schema_distribute($1)`, schema)
	require.NoError(t, err)

	queries := citusPlanQueries(t)
	names := make([]string, 0, len(queries))
	for name := range queries {
		names = append(names, name)
	}
	sort.Strings(names)
	var refused, errs []string
	for i, name := range names {
		if err := citusPlan(ctx, conn.Conn(), fmt.Sprintf("reckon_citus_check_%d", i), queries[name]); err != nil {
			refused = append(refused, name)
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
		}
	}
	t.Logf("%d queries, %d refused by Citus:\n%s", len(names), len(refused), strings.Join(errs, "\n"))
	if os.Getenv("RECKON_CITUS_QUERY_FILES") == "" {
		require.Equal(t, citusRefused, refused, "the queries Citus refuses to plan")
	}
}

// citusSchema migrates a schema named from prefix on the Citus coordinator RECKON_CITUS_URL
// names — a cell (MigratorConfig.Citus) when cell is set — and returns a pool on it; the schema
// (and a cell's River schema) is dropped when the test ends. It fails without RECKON_CITUS_URL.
func citusSchema(t *testing.T, prefix string, cell bool) (*pgxpool.Pool, string) {
	t.Helper()
	url := os.Getenv("RECKON_CITUS_URL")
	require.NotEmpty(t, url, "RECKON_CITUS_URL is not set (../shared/ci/citus-env starts a Citus cluster)")
	ctx := context.Background()
	schema := fmt.Sprintf("%s_%d", prefix, os.Getpid())
	config, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	require.NoError(t, db.ConfigureSchema(config, schema))
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+", "+
			pgx.Identifier{db.RiverSchema(schema)}.Sanitize()+" CASCADE")
		pool.Close()
		require.NoError(t, err)
	})
	migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Schema: schema, Citus: cell})
	require.NoError(t, err)
	_, err = migrator.Up(ctx)
	require.NoError(t, err)
	return pool, schema
}

// citusRefused are the queries of internal/dbsqlc Citus still refuses to plan in a distributed
// schema, sorted (docs/deploy.md says why for any listed): none.
var citusRefused []string

// citusPlan prepares sql on conn as statement and has Citus plan it with NULL arguments (EXPLAIN
// EXECUTE: planned, not run).
func citusPlan(ctx context.Context, conn *pgx.Conn, statement, sql string) error {
	if _, err := conn.Exec(ctx, "PREPARE "+statement+" AS "+sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer conn.Exec(ctx, "DEALLOCATE "+statement, pgx.QueryExecModeSimpleProtocol) //nolint:errcheck // the session ends with the test
	var params int
	if err := conn.QueryRow(ctx, `SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = $1`, statement).Scan(&params); err != nil {
		return err
	}
	explain := "EXPLAIN EXECUTE " + statement
	if params > 0 {
		explain += "(" + strings.TrimSuffix(strings.Repeat("NULL,", params), ",") + ")"
	}
	_, err := conn.Exec(ctx, explain, pgx.QueryExecModeSimpleProtocol)
	return err
}

// TestCitusCellAuditPartitions: in a cell (MigratorConfig.Citus), the audit trail's partitions
// are made ahead as on one Postgres — with their triggers, on the cell's node — and rows that the
// default partition took meanwhile are moved into theirs.
func TestCitusCellAuditPartitions(t *testing.T) {
	ctx := context.Background()
	pool, schema := citusSchema(t, "citus_cell", true)

	var last time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(range_to) FROM reckon_audit_partitions WHERE parent = 'reckon_effect_transitions'`).Scan(&last))
	// A row past the last partition lands in the default one, until its partition is made.
	_, err := pool.Exec(ctx, `INSERT INTO reckon_effect_transitions (effect_id, tenant_id, to_state, actor, reason, attempt, at)
		VALUES (gen_random_uuid(), 't', 'PENDING', 'test', 'test', 0, $1)`, last.Add(24*time.Hour))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE reckon_audit_settings SET premake = premake + interval '90 days'`)
	require.NoError(t, err)
	var created int
	require.NoError(t, pool.QueryRow(ctx, `SELECT reckon_audit_ensure_partitions('reckon_effect_transitions')`).Scan(&created))
	require.Positive(t, created)
	var inDefault, moved int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effect_transitions_default`).Scan(&inDefault))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effect_transitions WHERE actor = 'test'`).Scan(&moved))
	require.Equal(t, 0, inDefault, "the row moved out of the default partition")
	require.Equal(t, 1, moved)
	var nodes int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(DISTINCT s.nodeport) FROM citus_shards s JOIN pg_class c ON c.oid = s.table_name
		WHERE c.relnamespace = to_regnamespace($1)`, schema).Scan(&nodes))
	require.Equal(t, 1, nodes, "the new partitions live on the cell's node")
	_, err = pool.Exec(ctx, `UPDATE reckon_effect_transitions SET reason = 'x' WHERE actor = 'test'`)
	require.ErrorContains(t, err, "append-only", "the new partition refuses updates")

	// Retention drops an old partition as it does on one Postgres (the function runs on the
	// coordinator; its DETACH and DROP go to the cell's node).
	var oldest string
	require.NoError(t, pool.QueryRow(ctx, `SELECT partition FROM reckon_audit_partitions
		WHERE parent = 'reckon_effect_transitions' AND range_from IS NOT NULL ORDER BY range_from LIMIT 1`).Scan(&oldest))
	var dropped *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT reckon_audit_drop_partition($1, now() + interval '10 years', 'test', 'test')`, oldest).Scan(&dropped))
	require.NotNil(t, dropped)
	var left, drops int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_audit_partitions WHERE partition = $1`, oldest).Scan(&left))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_audit_drops WHERE partition = $1`, oldest).Scan(&drops))
	require.Equal(t, []int{0, 1}, []int{left, drops}, "the partition is gone, its drop recorded")
}
