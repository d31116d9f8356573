-- Operators' reads of effects across tenants (package cmd/server/internal/ops): the tenants that
-- have effects, the STUCK queue, the overview. all_tenants reads every tenant's; otherwise
-- tenant_ids are those read. The listing with filters is EffectList (effect.sql).

-- name: OpsEffectTenants :many
-- The tenants that have effects, in order: a loose scan of reckon_effects_created_idx (one index
-- descent per tenant), not a scan of the table.
WITH RECURSIVE tenants AS (
    (SELECT r.tenant_id FROM reckon_effects r ORDER BY r.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT r.tenant_id FROM reckon_effects r WHERE r.tenant_id > tenants.tenant_id ORDER BY r.tenant_id LIMIT 1)
    FROM tenants WHERE tenants.tenant_id IS NOT NULL
)
SELECT tenant_id::text FROM tenants WHERE tenant_id IS NOT NULL;

-- name: OpsStuckList :many
-- The STUCK effects of the tenants, longest stuck first (updated_at is when they became STUCK);
-- keyset pagination on (updated_at, id). reckon_effects_unresolved_idx (state, updated_at).
SELECT id, updated_at FROM reckon_effects
WHERE state = 'STUCK'
  AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]))
  AND (sqlc.narg(cursor_updated_at)::timestamptz IS NULL
       OR (updated_at, id) > (sqlc.narg(cursor_updated_at)::timestamptz, sqlc.narg(cursor_id)::uuid))
ORDER BY updated_at, id
LIMIT sqlc.arg(max_rows)::integer;

-- name: OpsStuckCount :one
SELECT count(*)::bigint FROM reckon_effects
WHERE state = 'STUCK' AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]));

-- name: OpsOverviewUnresolved :many
-- PENDING, UNKNOWN and STUCK effects per tenant, connector and state, with the oldest one's
-- creation; reckon_effects_unresolved_idx holds exactly these rows. The PENDING effects awaiting
-- their confirmation (0024_confirmations) are a group of their own (awaiting): they wait for a
-- person, not for the reactors.
SELECT tenant_id, connector, state, (state = 'PENDING' AND confirmation IS NOT DISTINCT FROM 'AWAITING')::boolean AS awaiting,
       count(*)::bigint AS count, min(created_at)::timestamptz AS oldest
FROM reckon_effects
WHERE state IN ('PENDING', 'UNKNOWN', 'STUCK')
  AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]))
GROUP BY tenant_id, connector, state, 4;

-- name: OpsAwaitingList :many
-- The effects of the tenants awaiting their confirmation, oldest first; keyset pagination on
-- (created_at, id). reckon_effects_awaiting_confirmation_idx holds exactly the awaiting ones.
SELECT id, created_at FROM reckon_effects
WHERE state = 'PENDING' AND confirmation = 'AWAITING'
  AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]))
  AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
       OR (created_at, id) > (sqlc.narg(cursor_created_at)::timestamptz, sqlc.narg(cursor_id)::uuid))
ORDER BY created_at, id
LIMIT sqlc.arg(max_rows)::integer;

-- name: OpsAwaitingCount :one
SELECT count(*)::bigint FROM reckon_effects
WHERE state = 'PENDING' AND confirmation = 'AWAITING'
  AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]));

-- name: OpsOverviewSettled :many
-- CONFIRMED and FAILED effects settled since @since, per tenant, connector and state;
-- reckon_effects_settled_idx (updated_at) of 0017.
SELECT tenant_id, connector, state, count(*)::bigint AS count
FROM reckon_effects
WHERE state IN ('CONFIRMED', 'FAILED') AND updated_at >= @since::timestamptz
  AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]))
GROUP BY tenant_id, connector, state;

-- name: OpsSettledPerMinute :many
-- CONFIRMED and FAILED effects settled since @since per minute (only minutes with some).
SELECT date_trunc('minute', updated_at)::timestamptz AS minute,
       count(*) FILTER (WHERE state = 'CONFIRMED')::bigint AS confirmed,
       count(*) FILTER (WHERE state = 'FAILED')::bigint AS failed
FROM reckon_effects
WHERE state IN ('CONFIRMED', 'FAILED') AND updated_at >= @since::timestamptz
  AND (sqlc.arg(all_tenants)::boolean OR tenant_id = ANY (sqlc.arg(tenant_ids)::text[]))
GROUP BY 1
ORDER BY 1;

-- name: OpsSagasOfEffects :many
-- The saga each of the effects is a step or the latest compensation of (none, or one per effect):
-- reckon_saga_steps_effect_idx and reckon_saga_steps_compensation_idx.
SELECT effect_id, saga_id FROM reckon_saga_steps WHERE effect_id = ANY (sqlc.arg(effect_ids)::uuid[])
UNION ALL
SELECT compensation_effect_id, saga_id FROM reckon_saga_steps WHERE compensation_effect_id = ANY (sqlc.arg(effect_ids)::uuid[]);
