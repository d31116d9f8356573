-- Connector limits (0025_limits, docs/design.md "Limits").

-- name: LimitAcquire :one
-- Asks for one call under the connector's limits and operators' pauses (reckon_limit_acquire_unpaused,
-- 0036): wait_ms 0 grants it.
SELECT a.wait_ms::integer AS wait_ms, a.reason::text AS reason
FROM reckon_limit_acquire_unpaused(@connector::text, @tenant_id::text, @effect_id::uuid, @queued_at::timestamptz,
    @rate::integer, @per_ms::integer, @burst::integer, @max_in_flight::integer, @per_tenant::boolean,
    @break_after::integer, @break_for_ms::integer, @hold_ms::integer, @grace_ms::integer) AS a;

-- name: LimitRelease :exec
-- Ends a call (reckon_limit_release): frees its slot and wakes the head of the cap's queue, keeps
-- the circuit's count, pauses the key on a Retry-After; failed NULL gives back a grant that made
-- no call.
SELECT reckon_limit_release(@connector::text, @tenant_id::text, @effect_id::uuid, @per_tenant::boolean,
    @break_after::integer, @break_for_ms::integer, sqlc.narg(failed)::boolean, @retry_after_ms::integer,
    @max_in_flight::integer, @rate::integer, @claim_ms::integer);

-- name: LimitClaim :one
-- Claims the place of a cap a release handed to an effect (reckon_limit_release): its slot, if it
-- has not lapsed, is held for the call (hold_ms) and the effect leaves the queue. False: no place
-- (lapsed, or only woken to ask again).
SELECT reckon_limit_claim(@effect_id::uuid, @hold_ms::integer)::boolean AS claimed;

-- name: LimitFetchNotify :exec
-- River's insert notification for a queue (what River's own insert sends): its producers fetch
-- the jobs that are due now, within their fetch cooldown, instead of at their next poll.
SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', @queue::text)::text);

-- name: LimitWaiting :one
-- Whether an effect waits for its limits (held back, not granted since).
SELECT EXISTS (SELECT 1 FROM reckon_limit_waiters WHERE effect_id = @effect_id)::boolean AS waiting;

-- name: LimitForget :exec
-- Takes an effect out of the queue of a limit key: an inline call held back is enqueued instead,
-- under another id.
DELETE FROM reckon_limit_waiters WHERE effect_id = @effect_id;

-- name: LimitOverrides :many
-- Every operator's limit, by connector.
SELECT * FROM reckon_connector_limits ORDER BY connector;

-- name: LimitOverride :one
SELECT * FROM reckon_connector_limits WHERE connector = @connector;

-- name: LimitThrottled :many
-- The limit keys paused or with a circuit not closed: what a reactor must ask the database about
-- even for a connector without limits.
SELECT connector, tenant_id, paused_until, opened_until
FROM reckon_limit_state
WHERE paused_until > now() OR opened_until IS NOT NULL
ORDER BY connector, tenant_id;

-- name: LimitSet :one
-- Sets an operator's limits for a connector, replacing its own. The caller tells the reactors
-- (LimitNotify) in the same transaction.
INSERT INTO reckon_connector_limits (connector, rate, per_ms, burst, max_in_flight, per_tenant, break_after, break_for_ms, set_by, reason, set_at)
VALUES (@connector, @rate, @per_ms, @burst, @max_in_flight, @per_tenant, @break_after, @break_for_ms, @set_by, @reason, now())
ON CONFLICT (connector) DO UPDATE SET rate = EXCLUDED.rate, per_ms = EXCLUDED.per_ms, burst = EXCLUDED.burst,
    max_in_flight = EXCLUDED.max_in_flight, per_tenant = EXCLUDED.per_tenant, break_after = EXCLUDED.break_after,
    break_for_ms = EXCLUDED.break_for_ms, set_by = EXCLUDED.set_by, reason = EXCLUDED.reason, set_at = EXCLUDED.set_at
RETURNING *;

-- name: LimitClear :execrows
-- Deletes an operator's limits for a connector (its own apply again). The caller tells the
-- reactors (LimitNotify) in the same transaction when a row was deleted.
DELETE FROM reckon_connector_limits WHERE connector = @connector;

-- name: LimitReset :execrows
-- Closes a connector's circuits and ends its pauses (every tenant's): an operator's word that the
-- upstream is back. The caller tells the reactors (LimitNotify) in the same transaction when a row
-- changed.
UPDATE reckon_limit_state SET paused_until = NULL, failures = 0, opened_until = NULL, probe_effect = NULL, probe_until = NULL
WHERE connector = @connector AND (paused_until IS NOT NULL OR failures > 0 OR opened_until IS NOT NULL);

-- name: LimitNotify :exec
-- Tells the reactors that the operators' limits or the limit state changed (at commit). A
-- statement of its own, not a SELECT over a data-modifying CTE: Citus sends such a statement,
-- notification included, to the worker holding the table, where no reactor listens.
SELECT pg_notify('reckon_limits', 'limits');

-- name: LimitStatus :many
-- The state of every limit key: the rate's schedule, pause, circuit, calls in flight and effects
-- waiting.
SELECT s.connector, s.tenant_id, s.next_at, s.paused_until, s.failures, s.opened_until,
       (SELECT count(*) FROM reckon_limit_slots sl
        WHERE sl.connector = s.connector AND sl.tenant_id = s.tenant_id AND sl.expires_at > now())::bigint AS in_flight,
       (SELECT count(*) FROM reckon_limit_waiters w
        WHERE w.connector = s.connector AND w.tenant_id = s.tenant_id AND w.expect_by > now())::bigint AS waiting
FROM reckon_limit_state s
ORDER BY s.connector, s.tenant_id;

-- name: LimitSweep :one
-- Deletes waiters and slots long past their time; returns how many.
WITH waiters AS (
    DELETE FROM reckon_limit_waiters WHERE expect_by < now() - interval '5 minutes' RETURNING 1
), slots AS (
    DELETE FROM reckon_limit_slots WHERE expires_at < now() - interval '5 minutes' RETURNING 1
)
SELECT ((SELECT count(*) FROM waiters) + (SELECT count(*) FROM slots))::bigint AS pruned;

-- name: LimitSlotsOfJobs :many
-- The places of a cap held by the calls of the effects of jobs (jobs taken over from a dead
-- reactor, whose calls will not end).
SELECT s.effect_id, s.connector, s.tenant_id
FROM reckon_limit_slots s JOIN reckon_effects e ON e.id = s.effect_id
WHERE e.job_id = ANY (@job_ids::bigint[]);

-- name: LimitWaitBusy :exec
-- Puts an effect in the queue of its limit key without asking its limits (its process's turn to
-- ask did not come in time): it waits as one refused does, announced once, and a freed place may
-- be handed to it. A reservation it holds is kept.
SELECT reckon_limit_wait_busy(@effect_id::uuid, @connector::text, @tenant_id::text, @queued_at::timestamptz, @expect_ms::integer);
