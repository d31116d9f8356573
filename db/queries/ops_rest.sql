-- Operators' reads of sagas, runs, sessions and connectors across tenants (package
-- cmd/server/internal/ops). all_tenants lists every tenant's; otherwise tenant_ids are those
-- listed.

-- name: OpsSagaTenants :many
-- The tenants that have sagas: a skip scan of reckon_sagas_created_idx (one probe per tenant).
WITH RECURSIVE tenant AS (
    (SELECT tenant_id FROM reckon_sagas ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT s.tenant_id FROM reckon_sagas s WHERE s.tenant_id > tenant.tenant_id ORDER BY s.tenant_id LIMIT 1)
    FROM tenant WHERE tenant.tenant_id IS NOT NULL
)
SELECT tenant_id::text FROM tenant WHERE tenant_id IS NOT NULL;

-- name: OpsSagaList :many
-- Sagas of the tenants, newest first, filtered by whatever is given; keyset pagination on
-- (created_at, id). Each tenant's newest come from reckon_sagas_created_idx (tenant_id,
-- created_at, id) and are merged.
SELECT s.id, s.created_at
FROM unnest(sqlc.arg(tenant_ids)::text[]) AS tenant(id)
CROSS JOIN LATERAL (
    SELECT id, created_at FROM reckon_sagas
    WHERE tenant_id = tenant.id
      AND (sqlc.narg(state)::reckon_saga_state IS NULL OR state = sqlc.narg(state)::reckon_saga_state)
      AND (sqlc.narg(name)::text IS NULL OR name = sqlc.narg(name)::text)
      AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
           OR (created_at, id) < (sqlc.narg(cursor_created_at)::timestamptz, sqlc.narg(cursor_id)::uuid))
    ORDER BY created_at DESC, id DESC
    LIMIT sqlc.arg(max_rows)::integer
) s
ORDER BY s.created_at DESC, s.id DESC
LIMIT sqlc.arg(max_rows)::integer;

-- name: OpsRunTenants :many
-- The tenants that have runs: a skip scan of reckon_runs' primary key (tenant_id, id).
WITH RECURSIVE tenant AS (
    (SELECT tenant_id FROM reckon_runs ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT r.tenant_id FROM reckon_runs r WHERE r.tenant_id > tenant.tenant_id ORDER BY r.tenant_id LIMIT 1)
    FROM tenant WHERE tenant.tenant_id IS NOT NULL
)
SELECT tenant_id::text FROM tenant WHERE tenant_id IS NOT NULL;

-- name: OpsRunList :many
-- Runs of the tenants, newest first; keyset pagination on (created_at, tenant_id, id). Each
-- tenant's newest come from reckon_runs_tenant_created_idx (tenant_id, created_at) and are merged.
SELECT r.tenant_id, r.id, r.created_at
FROM unnest(sqlc.arg(tenant_ids)::text[]) AS tenant(id)
CROSS JOIN LATERAL (
    SELECT tenant_id, id, created_at FROM reckon_runs
    WHERE tenant_id = tenant.id
      AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
           OR (created_at, tenant_id, id) < (sqlc.narg(cursor_created_at)::timestamptz, sqlc.narg(cursor_tenant_id)::text,
                                             sqlc.narg(cursor_id)::text))
    ORDER BY created_at DESC, id DESC
    LIMIT sqlc.arg(max_rows)::integer
) r
ORDER BY r.created_at DESC, r.tenant_id DESC, r.id DESC
LIMIT sqlc.arg(max_rows)::integer;

-- name: OpsRunAwaiting :many
-- The ids of a run's effects awaiting their callback (PENDING with a correlation id), soonest
-- deadline first; reckon_effects_run_idx (tenant_id, run_id).
SELECT id FROM reckon_effects
WHERE tenant_id = @tenant_id AND run_id = @run_id::text AND state = 'PENDING' AND correlation_id IS NOT NULL
ORDER BY deadline_at NULLS LAST, id
LIMIT sqlc.arg(max_rows)::integer;

-- name: OpsSessionTenants :many
-- The tenants that have turns (the first part of a session key): a skip scan of
-- reckon_turns_activity_idx (one probe per tenant).
WITH RECURSIVE tenant AS (
    (SELECT split_part(session_key, ':', 1) AS id FROM reckon_turns ORDER BY 1 LIMIT 1)
    UNION ALL
    SELECT (SELECT split_part(t.session_key, ':', 1) FROM reckon_turns t
            WHERE split_part(t.session_key, ':', 1) > tenant.id ORDER BY 1 LIMIT 1)
    FROM tenant WHERE tenant.id IS NOT NULL
)
SELECT id::text FROM tenant WHERE id IS NOT NULL;

-- name: OpsSessionList :many
-- Sessions of the tenants by the activity of their latest turn — its last message received or its
-- completion, whichever is later — newest first, with how many turns each keeps; keyset
-- pagination on (last_at, session_key). Each tenant's turns come from reckon_turns_activity_idx
-- (0020) read backwards, those with a later turn in their session skipped (a probe of
-- reckon_turns_session_seq_uniq), and are merged. Run it planned for its values (Ops.read): the
-- cursor may be NULL.
SELECT s.session_key, s.last_at::timestamptz AS last_at,
       (SELECT count(*) FROM reckon_turns c WHERE c.session_key = s.session_key)::integer AS turns
FROM unnest(sqlc.arg(tenant_ids)::text[]) AS tenant(id)
CROSS JOIN LATERAL (
    SELECT t.session_key, greatest(t.last_at, t.completed_at) AS last_at
    FROM reckon_turns t
    WHERE split_part(t.session_key, ':', 1) = tenant.id
      AND (sqlc.narg(cursor_last_at)::timestamptz IS NULL
           OR (greatest(t.last_at, t.completed_at), t.session_key)
              < (sqlc.narg(cursor_last_at)::timestamptz, sqlc.narg(cursor_session_key)::text))
      AND NOT EXISTS (SELECT 1 FROM reckon_turns n WHERE n.session_key = t.session_key AND n.seq > t.seq)
    ORDER BY greatest(t.last_at, t.completed_at) DESC, t.session_key DESC
    LIMIT sqlc.arg(max_rows)::integer
) s
ORDER BY s.last_at DESC, s.session_key DESC
LIMIT sqlc.arg(max_rows)::integer;

-- name: OpsTransitionTenants :many
-- The tenants with effect transitions: a skip scan of reckon_effect_transitions_tenant_at_idx.
WITH RECURSIVE tenant AS (
    (SELECT tenant_id FROM reckon_effect_transitions ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT t.tenant_id FROM reckon_effect_transitions t WHERE t.tenant_id > tenant.tenant_id ORDER BY t.tenant_id LIMIT 1)
    FROM tenant WHERE tenant.tenant_id IS NOT NULL
)
SELECT tenant_id::text FROM tenant WHERE tenant_id IS NOT NULL;

-- name: OpsConnectorOutcomes :many
-- Transitions of the tenants' effects into CONFIRMED, FAILED, UNKNOWN and STUCK since a time, per
-- connector: each tenant's from reckon_effect_transitions_tenant_at_idx (tenant_id, at) in the
-- partitions of `at`, then each effect by its primary key.
SELECT e.connector, t.to_state, count(*)::bigint AS count
FROM unnest(sqlc.arg(tenant_ids)::text[]) AS tenant(id)
JOIN reckon_effect_transitions t ON t.tenant_id = tenant.id AND t.at >= @since::timestamptz
JOIN reckon_effects e ON e.id = t.effect_id
WHERE t.to_state IN ('CONFIRMED', 'FAILED', 'UNKNOWN', 'STUCK')
  AND t.from_state IS DISTINCT FROM t.to_state
GROUP BY e.connector, t.to_state;
