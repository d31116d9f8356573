-- Schedules (0038_schedules, docs/design.md "Schedules").

-- name: SchedulePut :one
-- Creates or replaces a tenant's schedule. A replaced schedule keeps created_at/by, its last tick
-- and last effect, and its next tick when its timing is unchanged and it was and stays enabled
-- (a tick due but not yet enqueued is not lost); otherwise next_tick is the caller's (the first
-- tick after now of the new definition). inserted says whether it is new.
-- (updated_at comes from the VALUES: Citus refuses now() in DO UPDATE SET.)
INSERT INTO reckon_schedules AS s (tenant_id, name, connector, args, cron, interval_seconds, missed, enabled,
    next_tick, created_by, updated_by, updated_at)
VALUES (@tenant_id, @name, @connector, @args, sqlc.narg(cron), sqlc.narg(interval_seconds), @missed, @enabled,
    @next_tick, @actor, @actor, now())
ON CONFLICT (tenant_id, name) DO UPDATE SET connector = EXCLUDED.connector, args = EXCLUDED.args,
    cron = EXCLUDED.cron, interval_seconds = EXCLUDED.interval_seconds, missed = EXCLUDED.missed,
    enabled = EXCLUDED.enabled, last_error = NULL,
    next_tick = CASE WHEN s.enabled AND EXCLUDED.enabled AND s.cron IS NOT DISTINCT FROM EXCLUDED.cron
        AND s.interval_seconds IS NOT DISTINCT FROM EXCLUDED.interval_seconds THEN s.next_tick ELSE EXCLUDED.next_tick END,
    updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by
RETURNING s.*, (xmax = 0)::boolean AS inserted;

-- name: ScheduleGet :one
SELECT * FROM reckon_schedules WHERE tenant_id = @tenant_id AND name = @name;

-- name: ScheduleList :many
-- The schedules of a tenant (tenant_id set) or of every tenant, by tenant and name, after the
-- cursor (after_tenant, after_name; empty: from the start).
SELECT * FROM reckon_schedules
WHERE (sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text)
  AND (tenant_id, name) > (@after_tenant::text, @after_name::text)
ORDER BY tenant_id, name
LIMIT @max_rows;

-- name: ScheduleDelete :execrows
DELETE FROM reckon_schedules WHERE tenant_id = @tenant_id AND name = @name;

-- name: ScheduleDue :many
-- The enabled schedules whose next tick is due, oldest tick first: what a scheduler's round
-- looks at (each is then locked on its own: ScheduleLockDue).
SELECT tenant_id, name FROM reckon_schedules
WHERE enabled AND next_tick <= now()
ORDER BY next_tick
LIMIT @max_rows;

-- name: ScheduleLockDue :one
-- Locks one schedule if it is still enabled and due, skipping it when another scheduler holds it
-- (that one enqueues its ticks); now is the transaction's clock, the same for every reactor.
SELECT s.*, now()::timestamptz AS db_now FROM reckon_schedules s
WHERE s.tenant_id = @tenant_id AND s.name = @name AND s.enabled AND s.next_tick <= now()
FOR UPDATE SKIP LOCKED;

-- name: ScheduleAdvance :exec
-- Moves a locked schedule's next tick on after its round, with the last tick enqueued and its
-- effect (unchanged when the round enqueued none) and the round's error (NULL: none).
UPDATE reckon_schedules SET next_tick = @next_tick,
    last_tick = COALESCE(sqlc.narg(last_tick), last_tick),
    last_effect_id = COALESCE(sqlc.narg(last_effect_id), last_effect_id),
    last_error = sqlc.narg(last_error)
WHERE tenant_id = @tenant_id AND name = @name;

-- name: ScheduleFailed :exec
-- Records why a schedule's due tick could not be enqueued (its connector unknown to this reactor,
-- args refused): next_tick stays, so the tick is tried again next round.
UPDATE reckon_schedules SET last_error = @last_error
WHERE tenant_id = @tenant_id AND name = @name;
