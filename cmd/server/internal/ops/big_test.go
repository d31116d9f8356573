package ops_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// TestBigDatabase measures the operators' reads on a large database, loaded by
// scripts/load-effects.sql (1,000,000 effects by default), and checks their plans: the overview
// and the STUCK queue within 200 ms, and no read of any listing a scan of reckon_effects. Each read
// runs 12 times through one pool, so that prepared statements pass the 5 executions after which
// Postgres may switch to a generic plan. It runs only with RECKON_OPS_BIG_DATABASE_URL:
//
//	createdb reckon_1m && server migrate up -database-url .../reckon_1m
//	psql .../reckon_1m -f scripts/load-effects.sql
//	RECKON_OPS_BIG_DATABASE_URL=postgres://postgres@127.0.0.1:5432/reckon_1m go test -run TestBigDatabase -v ./cmd/server/internal/ops
func TestBigDatabase(t *testing.T) {
	big := os.Getenv("RECKON_OPS_BIG_DATABASE_URL")
	if big == "" {
		t.Skip("RECKON_OPS_BIG_DATABASE_URL is not set")
	}
	ctx := context.Background()
	config, err := pgxpool.ParseConfig(big)
	require.NoError(t, err)
	counter := &statementCounter{}
	config.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	o := bigOps(t, pool)

	n := testkit.Count(t, pool, `SELECT count(*) FROM reckon_effects`)
	t.Logf("reckon_effects: %d rows", n)

	// A sample of values to filter by.
	var key, businessKey, run, tenant, turn string
	var created time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT idempotency_key, business_key, tenant_id, created_at FROM reckon_effects
		WHERE business_key IS NOT NULL ORDER BY tenant_id, created_at DESC LIMIT 1`).Scan(&key, &businessKey, &tenant, &created))
	require.NoError(t, pool.QueryRow(ctx, `SELECT run_id FROM reckon_effects WHERE tenant_id = $1 AND run_id IS NOT NULL LIMIT 1`, tenant).Scan(&run))
	require.NoError(t, pool.QueryRow(ctx, `SELECT turn_id::text FROM reckon_effects WHERE turn_id IS NOT NULL LIMIT 1`).Scan(&turn))

	measure := func(name string, limit time.Duration, read func() error) {
		t.Helper()
		measureRead(t, name, limit, read)
	}
	measure("overview", 200*time.Millisecond, func() error { _, err := o.Overview(ctx, ops.Scope{}); return err })
	measure("overview, one tenant in scope", 200*time.Millisecond, func() error {
		_, err := o.Overview(ctx, ops.Scope{Tenants: []string{tenant}})
		return err
	})
	measure("STUCK queue, 50 with evidence", 200*time.Millisecond, func() error { _, _, _, err := o.Stuck(ctx, ops.Scope{}, 50, ""); return err })
	counter.n.Store(0)
	stuck, _, _, err := o.Stuck(ctx, ops.Scope{}, 50, "")
	require.NoError(t, err)
	t.Logf("STUCK queue, %d with evidence: %d statements", len(stuck), counter.n.Load())
	measure("STUCK queue, 20 with evidence", 200*time.Millisecond, func() error { _, _, _, err := o.Stuck(ctx, ops.Scope{}, 20, ""); return err })
	measure("awaiting confirmation, 50", 200*time.Millisecond, func() error { _, _, _, err := o.Awaiting(ctx, ops.Scope{}, 50, ""); return err })

	filters := []url.Values{
		{},
		{"tenant": {tenant}},
		{"state": {"STUCK"}},
		{"state": {"PENDING"}},
		{"state": {"FAILED"}},
		{"state": {"UNKNOWN"}, "tenant": {tenant}},
		{"connector": {"bank.wire"}},
		{"connector": {"bank.wire"}, "state": {"STUCK"}},
		{"idempotency_key": {key}},
		{"idempotency_key": {key}, "tenant": {tenant}},
		{"business_key": {businessKey}},
		{"run": {run}},
		{"turn": {turn}},
		{"created_after": {created.Add(-time.Hour).Format(time.RFC3339Nano)}, "created_before": {created.Format(time.RFC3339Nano)}},
		{"created_before": {created.Add(-10 * 24 * time.Hour).Format(time.RFC3339Nano)}},
	}
	for _, v := range filters {
		f, err := ops.ParseEffectFilter(v)
		require.NoError(t, err)
		var next string
		measure("effects "+describe(v), 0, func() error { _, next, err = o.Effects(ctx, f); return err })
		if next != "" {
			f.After = next
			measure("effects "+describe(v)+", page 2", 0, func() error { _, _, err := o.Effects(ctx, f); return err })
		}
		// The generic plan Postgres would make for the listing if it were not forced to plan for
		// the values given: reported, for the record.
	}
	measure("preview resolve, all STUCK", 0, func() error { _, _, err := o.PreviewResolve(ctx, ops.EffectFilter{}, 0); return err })

	requireEvidenceUsesIndexes(t, pool, stuck)

	// Plans: no scan of reckon_effects in any of the reads above (auto_explain logs each
	// statement's plan; here the statements are explained with the same parameters).
	for name, sql := range plannedQueries(t) {
		for _, args := range sql.args(tenant, key, businessKey, run, turn, created) {
			plan := explain(t, pool, sql.text, args)
			require.NotRegexp(t, `Seq Scan on reckon_effects`, plan, "%s %v:\n%s", name, args, plan)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func describe(v url.Values) string {
	if len(v) == 0 {
		return "(no filter)"
	}
	var parts []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	}) {
		value := v.Get(name)
		if len(value) > 12 {
			value = value[:12] + "…"
		}
		parts = append(parts, name+"="+value)
	}
	return strings.Join(parts, " ")
}

// plannedQuery is a generated query's SQL and the argument lists to explain it with.
type plannedQuery struct {
	text string
	args func(tenant, key, businessKey, run, turn string, created time.Time) [][]any
}

// plannedQueries reads the SQL of the operators' queries from internal/dbsqlc (the generated
// code holds it as constants).
func plannedQueries(t *testing.T) map[string]plannedQuery {
	t.Helper()
	read := func(file, constant string) string {
		src, err := os.ReadFile("../../../../internal/dbsqlc/" + file)
		require.NoError(t, err)
		m := regexp.MustCompile("const " + constant + " = `([^`]*)`").FindSubmatch(src)
		require.NotNil(t, m, constant)
		return string(m[1])
	}
	all := []string{}
	return map[string]plannedQuery{
		"EffectList": {read("effect.sql.go", "effectList"), func(tenant, key, businessKey, run, turn string, created time.Time) [][]any {
			tenants := []string{"tenant-0", "tenant-1", "tenant-2", "tenant-3", "tenant-4"}
			// tenant_ids, state, connector, run_id, idempotency_key, business_key, turn_id,
			// compensates_id, created_after, created_before, cursor_created_at, cursor_id, max_rows
			return [][]any{
				{tenants, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, 50},
				{tenants, "STUCK", nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, 50},
				{tenants, "FAILED", nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, 50},
				{tenants, nil, "bank.wire", nil, nil, nil, nil, nil, nil, nil, nil, nil, 50},
				{tenants, nil, nil, run, nil, nil, nil, nil, nil, nil, nil, nil, 50},
				{tenants, nil, nil, nil, key, nil, nil, nil, nil, nil, nil, nil, 50},
				{tenants, nil, nil, nil, nil, businessKey, nil, nil, nil, nil, nil, nil, 50},
				{tenants, nil, nil, nil, nil, nil, turn, nil, nil, nil, nil, nil, 50},
				{[]string{tenant}, nil, nil, nil, nil, nil, nil, nil, created.Add(-time.Hour), created, nil, nil, 50},
			}
		}},
		"OpsEffectTenants": {read("ops.sql.go", "opsEffectTenants"), func(string, string, string, string, string, time.Time) [][]any {
			return [][]any{{}}
		}},
		"OpsStuckList": {read("ops.sql.go", "opsStuckList"), func(string, string, string, string, string, time.Time) [][]any {
			return [][]any{{true, all, nil, nil, 50}, {false, []string{"tenant-1"}, nil, nil, 50}}
		}},
		"OpsAwaitingList": {read("ops.sql.go", "opsAwaitingList"), func(string, string, string, string, string, time.Time) [][]any {
			return [][]any{{true, all, nil, nil, 50}, {false, []string{"tenant-1"}, nil, nil, 50}}
		}},
		"OpsOverviewUnresolved": {read("ops.sql.go", "opsOverviewUnresolved"), func(string, string, string, string, string, time.Time) [][]any {
			return [][]any{{true, all}}
		}},
		"OpsOverviewSettled": {read("ops.sql.go", "opsOverviewSettled"), func(string, string, string, string, string, time.Time) [][]any {
			return [][]any{{time.Now().Add(-24 * time.Hour), true, all}}
		}},
		"OpsSettledPerMinute": {read("ops.sql.go", "opsSettledPerMinute"), func(string, string, string, string, string, time.Time) [][]any {
			return [][]any{{time.Now().Add(-time.Hour), true, all}}
		}},
	}
}

// explain returns the plan of sql with args, as EXPLAIN ANALYZE prints it.
func explain(t *testing.T, pool *pgxpool.Pool, sql string, args []any) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	require.NoError(t, err, sql)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	plan := strings.Join(lines, "\n")
	if os.Getenv("RECKON_OPS_PRINT_PLANS") != "" {
		fmt.Println(plan)
	}
	return plan
}

// bigOps is the operators' reads and actions on pool, built as the server builds them.
func bigOps(t *testing.T, pool *pgxpool.Pool) *ops.Ops {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: logger})
	require.NoError(t, err)
	turnsClient, err := turns.NewClient(pool, &turns.Config{Logger: logger})
	require.NoError(t, err)
	client, err := effects.NewClient(pool, &effects.Config{Registry: effects.NewRegistry(), Logger: logger, Plugins: []effects.Plugin{sagas, turnsClient}})
	require.NoError(t, err)
	return ops.New(pool, client, sagas, turnsClient)
}

// measureRead runs read 12 times, logs its median and longest time under name and, when limit is
// set, requires the median under it.
func measureRead(t *testing.T, name string, limit time.Duration, read func() error) {
	t.Helper()
	var times []time.Duration
	for range 12 {
		start := time.Now()
		require.NoError(t, read(), name)
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	t.Logf("%-45s median %7.1f ms  max %7.1f ms", name, ms(times[len(times)/2]), ms(times[len(times)-1]))
	if limit > 0 {
		require.Less(t, times[len(times)/2], limit, name)
	}
}

// requireEvidenceUsesIndexes: the evidence of a STUCK page (stuck) reads histories from
// reckon_effect_transitions_effect_idx of each partition and compensations from
// reckon_effects_compensates_idx, never scanning either table.
func requireEvidenceUsesIndexes(t *testing.T, pool *pgxpool.Pool, stuck []*ops.Evidence) {
	t.Helper()
	var page []string
	for _, ev := range stuck {
		page = append(page, ev.Effect.ID.String())
	}
	for sql, index := range map[string]string{
		`SELECT * FROM reckon_effect_transitions WHERE effect_id = ANY ($1::uuid[]) ORDER BY effect_id, id`:                      "reckon_effect_transitions_effect_idx",
		`SELECT * FROM reckon_effects WHERE compensates_id = ANY ($1::uuid[]) ORDER BY compensates_id, created_at DESC, id DESC`: "reckon_effects_compensates_idx",
	} {
		plan := explain(t, pool, sql, []any{page})
		require.Contains(t, plan, index, sql)
		require.NotRegexp(t, `Seq Scan on (reckon_effects|reckon_effect_transitions_p0) `, plan, sql)
	}
}
