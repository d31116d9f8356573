package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit"
)

// TestReactorRetentionConfig: a retention flag or variable out of range is refused with exit status
// 2 and a message naming it.
func TestReactorRetentionConfig(t *testing.T) {
	t.Parallel()
	requireRefused(t, []refused{
		{nil, []string{"-effect-retention", "30m"}, "-effect-retention must be at least 1h0m0s"},
		{nil, []string{"-audit-retention", "24h"}, "-audit-retention must be 0 (keep forever) or at least -effect-retention 720h0m0s"},
		{nil, []string{"-audit-retention", "-1h"}, "-audit-retention"},
		{nil, []string{"-dedup-window", "-1s"}, "-dedup-window must be 0"},
		{nil, []string{"-idempotency-ttl", "0s"}, "-idempotency-ttl must be at least 1s"},
		{nil, []string{"-retention-interval", "10ms"}, "-retention-interval must be 0"},
		{nil, []string{"-retention-batch", "0"}, "-retention-batch must be between 1 and 10000"},
		{[]string{"RECKON_RETENTION_BATCH=20000"}, nil, "-retention-batch must be between 1 and 10000, got 20000"},
		{[]string{"RECKON_EFFECT_RETENTION=30"}, nil, `RECKON_EFFECT_RETENTION="30": not a duration`},
	})
}

// TestReactorRunsRetention: the reactor makes the audit partitions ahead when it starts and, with
// -retention-interval, prunes at once (the periodic job runs on start), recorded under its id and
// counted in its metrics; with -retention-interval 0 it has no retention job.
func TestReactorRunsRetention(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `
		INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
		SELECT gen_random_uuid(), 'acme', 'bank.wire', 'old-' || g, 'idempotent', 'test', 'seeded' FROM generate_series(1, 30) g`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'settled'`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_effects SET updated_at = now() - interval '40 days'`)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `UPDATE reckon_audit_settings SET premake = interval '150 days'`)
	require.NoError(t, err, "partitions are due further ahead")

	idle := f.startReactor("-id", "idle", "-retention-interval", "0")
	require.True(t, idle.Logged("audit partitions made ahead"), idle.Stderr())
	require.NotContains(t, scrape(t, idle), "reckon_retention_runs_total", "no retention job")
	idle.Stop(t)
	require.Zero(t, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs`))

	p := f.startReactor("-id", "pruner", "-retention-interval", "1h", "-retention-batch", "7")
	require.Eventually(t, func() bool {
		return testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_retention_runs WHERE actor = 'retention:pruner' AND finished_at IS NOT NULL AND error IS NULL`) == 1
	}, 30*time.Second, 20*time.Millisecond, p.Stderr())
	require.Zero(t, testkit.Count(t, f.pool, `SELECT count(*) FROM reckon_effects WHERE idempotency_key LIKE 'old-%'`))
	body := scrape(t, p)
	require.Contains(t, body, `reckon_retention_rows_pruned_total{table="reckon_effects"} 30`)
	require.Contains(t, body, `reckon_retention_runs_total{result="ok"} 1`)
	p.Stop(t)
}
