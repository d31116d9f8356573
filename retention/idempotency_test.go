package retention_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// PruneIdempotencyKeys deletes the stored responses created before the cutoff, batch by batch,
// and keeps the younger ones.
func TestPruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for i := range 7 {
		h.exec(`INSERT INTO reckon_idempotency_keys (tenant_id, key, method, path, request_sha256, status, response, created_at)
		        VALUES ('acme', $1, 'POST', '/v1/effects', '\x00', 201, '{}', $2)`, fmt.Sprintf("k-%d", i), h.t0.Add(-time.Duration(i)*time.Hour))
	}
	n, err := retention.PruneIdempotencyKeys(h.ctx, h.pool, h.t0.Add(-90*time.Minute), 2)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "k-2 … k-6")
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_idempotency_keys WHERE key IN ('k-0', 'k-1')`))
	_, err = retention.PruneIdempotencyKeys(h.ctx, h.pool, h.t0, 0)
	require.ErrorContains(t, err, "batch")
}

// The records of retention runs are kept as long as the audit history, and forever without an
// audit retention.
func TestRunRecordsPruned(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.exec(`INSERT INTO reckon_retention_runs (actor, started_at, finished_at) VALUES ('old', $1, $1)`, h.t0.Add(-401*day))
	h.exec(`INSERT INTO reckon_retention_runs (actor, started_at, finished_at) VALUES ('kept', $1, $1)`, h.t0.Add(-399*day))
	report := h.run(h.retention(0))
	require.Zero(t, report.Removed[retention.TableRetentionRuns], "no audit retention: kept forever")
	report = h.run(h.retention(0, func(c *retention.Config) { c.AuditRetention = 400 * day }))
	require.EqualValues(t, 1, report.Removed[retention.TableRetentionRuns])
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_retention_runs WHERE actor = 'old'`))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_retention_runs WHERE actor = 'kept'`))
}
