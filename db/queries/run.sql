-- Runs are scoped per tenant (0013_runs_per_tenant): a run is named by (tenant_id, id), and its
-- effects by (tenant_id, run_id).

-- name: RunLockForEnqueue :one
-- Creates the tenant's run if it does not exist and locks its row until the caller's transaction
-- ends, so that concurrent enqueues into one run check its guardrails one after the other.
INSERT INTO reckon_runs AS r (tenant_id, id) VALUES (@tenant_id, @id)
ON CONFLICT (tenant_id, id) DO UPDATE SET updated_at = r.updated_at
RETURNING *;

-- name: RunStart :one
-- Creates the tenant's run with its guardrails, or sets the guardrails of its existing run.
-- (updated_at comes from the VALUES: Citus refuses now() in DO UPDATE SET.)
INSERT INTO reckon_runs AS r (tenant_id, id, max_steps, max_consecutive_failures, updated_at)
VALUES (@tenant_id, @id, sqlc.narg(max_steps), sqlc.narg(max_consecutive_failures), now())
ON CONFLICT (tenant_id, id) DO UPDATE
SET max_steps = excluded.max_steps,
    max_consecutive_failures = excluded.max_consecutive_failures,
    updated_at = excluded.updated_at
RETURNING *;

-- name: RunGet :one
SELECT * FROM reckon_runs WHERE tenant_id = @tenant_id AND id = @id;

-- name: RunGetForUpdate :one
SELECT * FROM reckon_runs WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: RunCancel :one
-- Marks a run cancelled (the first cancellation's time, actor and reason are kept; reckon_pick, as
-- Citus refuses now() in a COALESCE).
UPDATE reckon_runs
SET cancelled_at = reckon_pick(cancelled_at IS NULL, now(), cancelled_at),
    cancelled_by = coalesce(cancelled_by, @actor::text),
    cancel_reason = coalesce(cancel_reason, @reason::text),
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: RunCountEffects :many
-- How many effects of the run are in each state.
SELECT state, count(*)::bigint AS count FROM reckon_effects
WHERE tenant_id = @tenant_id AND run_id = @run_id::text
GROUP BY state;

-- name: RunStats :one
-- A run's guardrail counts: steps (its effects, compensations excluded), failures (those FAILED)
-- and consecutive failures (those that became FAILED after the last one became CONFIRMED).
SELECT
    count(*)::integer AS steps,
    count(*) FILTER (WHERE e.state = 'FAILED')::integer AS failures,
    count(*) FILTER (WHERE e.state = 'FAILED' AND e.updated_at > coalesce(c.last_confirmed, '-infinity'))::integer AS consecutive_failures
FROM reckon_effects e
CROSS JOIN (
    SELECT max(updated_at) AS last_confirmed FROM reckon_effects
    WHERE tenant_id = sqlc.arg(tenant_id)::text AND run_id = sqlc.arg(run_id)::text
      AND state = 'CONFIRMED' AND compensates_id IS NULL
) c
WHERE e.tenant_id = sqlc.arg(tenant_id)::text AND e.run_id = sqlc.arg(run_id)::text AND e.compensates_id IS NULL;
