-- name: RunLockForEnqueue :one
-- Creates the run if it does not exist and locks its row until the caller's transaction ends, so
-- that concurrent enqueues into one run check its guardrails one after the other.
INSERT INTO reckon_runs AS r (id, tenant_id) VALUES (@id, @tenant_id)
ON CONFLICT (id) DO UPDATE SET updated_at = r.updated_at
RETURNING *;

-- name: RunStart :one
-- Creates a run with its guardrails, or sets the guardrails of an existing run of the same
-- tenant (no row: the run belongs to another tenant).
INSERT INTO reckon_runs AS r (id, tenant_id, max_steps, max_consecutive_failures)
VALUES (@id, @tenant_id, sqlc.narg(max_steps), sqlc.narg(max_consecutive_failures))
ON CONFLICT (id) DO UPDATE
SET max_steps = excluded.max_steps,
    max_consecutive_failures = excluded.max_consecutive_failures,
    updated_at = now()
WHERE r.tenant_id = excluded.tenant_id
RETURNING *;

-- name: RunGet :one
SELECT * FROM reckon_runs WHERE id = @id;

-- name: RunGetForUpdate :one
SELECT * FROM reckon_runs WHERE id = @id FOR UPDATE;

-- name: RunCancel :one
-- Marks a run cancelled (the first cancellation's actor and reason are kept).
UPDATE reckon_runs
SET cancelled_at = coalesce(cancelled_at, now()),
    cancelled_by = coalesce(cancelled_by, @actor::text),
    cancel_reason = coalesce(cancel_reason, @reason::text),
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: RunCountEffects :many
-- How many effects of the run are in each state.
SELECT state, count(*)::bigint AS count FROM reckon_effects WHERE run_id = @run_id GROUP BY state;

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
    WHERE run_id = sqlc.arg(run_id)::text AND state = 'CONFIRMED' AND compensates_id IS NULL
) c
WHERE e.run_id = sqlc.arg(run_id)::text AND e.compensates_id IS NULL;
