package retention_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit"
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
