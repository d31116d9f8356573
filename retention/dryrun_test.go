package retention_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// A dry run changes nothing — no row, no tombstone, no partition — and counts what the run after it
// removes, including the effects that the sagas and turn groups pruned first in that run free.
func TestDryRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	old := 40 * day
	h.saga("COMPLETED", old, h.effect(effect{settled: old}))
	group := uuid.New()
	h.turn(turn{group: group, age: old})
	h.effect(effect{settled: old, turnGroup: group.String()})
	h.runRow("default", "r", old)
	h.effect(effect{runID: "r", settled: old})
	undone := h.effect(effect{settled: old})
	h.effect(effect{settled: old, compensates: &undone})
	h.effect(effect{state: "PENDING", settled: old})
	h.exec(`INSERT INTO reckon_idempotency_keys (tenant_id, key, method, path, request_sha256, status, response, created_at)
	        VALUES ('default', 'k', 'POST', '/v1/effects', '\x00', 201, '{}', $1)`, h.t0.Add(-2*day))
	h.exec(`INSERT INTO reckon_callback_signatures (signature, effect_id, expires_at) VALUES (sha256('s'), gen_random_uuid(), $1)`, h.t0.Add(-day))
	// An expired console session and a live one: only the first goes.
	h.exec(`INSERT INTO reckon_operators (id, name, role, prefix, token_sha256) VALUES ('00000000-0000-0000-0000-000000000001', 'ann', 'viewer', 'rko_', sha256('t'))`)
	h.exec(`INSERT INTO reckon_operator_sessions (id_sha256, operator_id, csrf, expires_at)
	        VALUES (sha256('old'), '00000000-0000-0000-0000-000000000001', 'c', $1), (sha256('live'), '00000000-0000-0000-0000-000000000001', 'c', $2)`,
		h.t0.Add(-time.Hour), h.t0.Add(time.Hour))
	h.exec(`INSERT INTO reckon_effect_tombstones (tenant_id, idempotency_key, effect_id, state, settled_at, expires_at)
	        VALUES ('default', 'gone', gen_random_uuid(), 'CONFIRMED', $1, $2)`, h.t0.Add(-90*day), h.t0.Add(-day))
	configure := func(c *retention.Config) { c.DedupWindow = 60 * day; c.AuditRetention = 400 * day }

	snapshot := func() map[string]int {
		counts := map[string]int{}
		for _, table := range []string{"reckon_effects", "reckon_sagas", "reckon_saga_steps", "reckon_turns", "reckon_messages",
			"reckon_turn_decisions", "reckon_runs", "reckon_effect_tombstones", "reckon_idempotency_keys", "reckon_callback_signatures",
			"reckon_operator_sessions", "reckon_audit_partitions", "reckon_audit_drops"} {
			counts[table] = h.count("SELECT count(*) FROM " + table)
		}
		return counts
	}
	before := snapshot()
	dry, err := h.retention(0, configure).Run(h.ctx, &retention.RunOpts{Actor: "test", DryRun: true})
	require.NoError(t, err)
	require.True(t, dry.DryRun)
	require.Equal(t, before, snapshot(), "a dry run changes nothing")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_retention_runs WHERE dry_run AND finished_at IS NOT NULL`), "it is recorded")

	real := h.run(h.retention(0, configure))
	dry.Removed[retention.TableRetentionRuns] = real.Removed[retention.TableRetentionRuns]
	require.Equal(t, real.Removed, dry.Removed)
	require.EqualValues(t, 5, real.Removed[retention.TableEffects])
	require.EqualValues(t, 1, real.Removed[retention.TableIdempotencyKeys])
	require.EqualValues(t, 1, real.Removed[retention.TableCallbackSignatures])
	require.EqualValues(t, 1, real.Removed[retention.TableTombstones])
	require.EqualValues(t, 1, real.Removed[retention.TableOperatorSessions])
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_operator_sessions WHERE id_sha256 = sha256('live')`), "the live session stays")
}
