package retention_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/retention"
)

// A tenant's policy replaces the global retention for its effects, sagas, runs and turn groups,
// shorter or longer; removing it brings the tenant back to the global retention.
func TestPolicies(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, err := retention.SetPolicy(h.ctx, h.pool, "short", 2*time.Hour)
	require.NoError(t, err)
	_, err = retention.SetPolicy(h.ctx, h.pool, "long", 90*day)
	require.NoError(t, err)

	shortOld := h.effect(effect{tenant: "short", settled: 3 * time.Hour})
	shortNew := h.effect(effect{tenant: "short", settled: time.Hour})
	shortGroup := uuid.New()
	h.turn(turn{session: "short:agent:user:chat", group: shortGroup, age: 3 * time.Hour})
	h.runRow("short", "r", 3*time.Hour)
	shortRunEffect := h.effect(effect{tenant: "short", runID: "r", settled: 3 * time.Hour})
	longKept := h.effect(effect{tenant: "long", settled: 40 * day})
	longOld := h.effect(effect{tenant: "long", settled: 91 * day})
	globalOld := h.effect(effect{settled: 31 * day})
	globalNew := h.effect(effect{settled: 29 * day})

	h.run(h.retention(0))
	for name, id := range map[string]uuid.UUID{"short 3h": shortOld, "short run's effect": shortRunEffect, "long 91d": longOld, "global 31d": globalOld} {
		require.False(t, h.exists("reckon_effects", id), "%s pruned", name)
	}
	for name, id := range map[string]uuid.UUID{"short 1h": shortNew, "long 40d": longKept, "global 29d": globalNew} {
		require.True(t, h.exists("reckon_effects", id), "%s kept", name)
	}
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_turns WHERE turn_group = $1`, shortGroup), "the turns' tenant is the session key's first part")
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_runs WHERE tenant_id = 'short'`))

	deleted, err := retention.DeletePolicy(h.ctx, h.pool, "long")
	require.NoError(t, err)
	require.True(t, deleted)
	h.run(h.retention(0))
	require.False(t, h.exists("reckon_effects", longKept), "without its policy: the global 30 days")

	policies, err := retention.ListPolicies(h.ctx, h.pool)
	require.NoError(t, err)
	require.Len(t, policies, 1)
	require.Equal(t, retention.Policy{TenantID: "short", EffectRetention: 2 * time.Hour, UpdatedAt: policies[0].UpdatedAt}, policies[0])
}

// Policies refuse a tenant id outside reckon_tenants' rule and a retention under an hour.
func TestPolicyInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, tenant := range []string{"", "a:b", "-x", "acme\x00", string([]byte{0xff}), "x" + string(make([]byte, 63))} {
		_, err := retention.SetPolicy(h.ctx, h.pool, tenant, time.Hour)
		require.ErrorIs(t, err, retention.ErrInvalid, "tenant %q", tenant)
		_, err = retention.DeletePolicy(h.ctx, h.pool, tenant)
		require.ErrorIs(t, err, retention.ErrInvalid, "tenant %q", tenant)
	}
	for _, d := range []time.Duration{0, -time.Hour, time.Hour - time.Second, time.Hour + time.Millisecond} {
		_, err := retention.SetPolicy(h.ctx, h.pool, "acme", d)
		require.ErrorIs(t, err, retention.ErrInvalid, "retention %v", d)
	}
	deleted, err := retention.DeletePolicy(h.ctx, h.pool, "acme")
	require.NoError(t, err)
	require.False(t, deleted)
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_retention_policies`))
}
