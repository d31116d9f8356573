-- name: RiverJobGetForUpdate :one
-- Locks an effect's River job so that no reactor can fetch it while an operator cancels the effect
-- or a callback settles it (River fetches with FOR UPDATE SKIP LOCKED).
-- shared: a batch dispatch job, carrying other effects too.
SELECT id, kind, state, attempt, (args ? 'effect_ids')::boolean AS shared FROM river_job WHERE id = @id FOR UPDATE;


-- name: RiverJobTakeOver :many
-- Hands back the running jobs of the queue whose last attempt belongs to a reactor found dead, as
-- River's rescuer would an hour later: available again at once (River's next run of it has
-- attempt + 1, which the workers treat as "an earlier run may have done part of the work"),
-- discarded when its attempts are spent, cancelled when a cancel was asked for. The reason is
-- appended to the job's errors, as River records a failed attempt.
UPDATE river_job
SET state = CASE
        WHEN metadata ? 'cancel_attempted_at' THEN 'cancelled'::river_job_state
        WHEN attempt >= max_attempts THEN 'discarded'::river_job_state
        ELSE 'available'::river_job_state
    END,
    scheduled_at = reckon_pick(metadata ? 'cancel_attempted_at' OR attempt >= max_attempts, scheduled_at, now()),
    finalized_at = reckon_pick(metadata ? 'cancel_attempted_at' OR attempt >= max_attempts, now(), NULL),
    errors = array_append(errors, jsonb_build_object('at', now(), 'error', @error::text, 'trace', '')
        || jsonb_set('{}', '{attempt}', attempt::text::jsonb)),
    metadata = metadata || jsonb_build_object('reckon:taken_over_from', @owner::text)
WHERE state = 'running' AND queue = @queue::text AND attempted_by[cardinality(attempted_by)] = @owner::text
RETURNING id, kind, state, attempted_at;

-- name: RiverJobTakeOverUnregistered :many
-- Hands back, as RiverJobTakeOver does, the running jobs of the queue whose last attempt belongs to
-- a River client that is not a registered reactor (a reactor of a version before registration,
-- migration 0010, left them running when it died during or before an upgrade), once no live client
-- can still be running them: such a client holds no liveness lock to test, so the job itself
-- decides. River cancels a run at its timeout — for Reckon's kinds, the call timeout in the job's
-- args (timeout_ms) plus the in-flight margin — and the worker returns; a job still running past
-- attempted_at + timeout_ms + margin_ms has no live run (the sweeper relies on the same bound to
-- make an attempt's effect UNKNOWN). Only the kinds given, which carry timeout_ms; others (turn
-- jobs) are left to River's rescuer. The owner is named in the errors and metadata. registered:
-- the registered reactors' ids (ReactorListIDs; River's tables and Reckon's are read apart, as a
-- Citus cell keeps them on different nodes).
UPDATE river_job
SET state = CASE
        WHEN metadata ? 'cancel_attempted_at' THEN 'cancelled'::river_job_state
        WHEN attempt >= max_attempts THEN 'discarded'::river_job_state
        ELSE 'available'::river_job_state
    END,
    scheduled_at = reckon_pick(metadata ? 'cancel_attempted_at' OR attempt >= max_attempts, scheduled_at, now()),
    finalized_at = reckon_pick(metadata ? 'cancel_attempted_at' OR attempt >= max_attempts, now(), NULL),
    errors = array_append(errors, jsonb_build_object('at', now(), 'trace', '')
        || jsonb_object(ARRAY['error'], ARRAY['River client ' || coalesce(attempted_by[cardinality(attempted_by)], '?') || @error::text])
        || jsonb_set('{}', '{attempt}', attempt::text::jsonb)),
    metadata = metadata || jsonb_object(ARRAY['reckon:taken_over_from'], ARRAY[coalesce(attempted_by[cardinality(attempted_by)], '')])
WHERE state = 'running' AND queue = @queue::text AND kind = ANY (@kinds::text[])
  AND args ? 'timeout_ms'
  AND now() - attempted_at > make_interval(0, 0, 0, 0, 0, 0,
      ((args->>'timeout_ms')::bigint + sqlc.arg(margin_ms)::bigint)::float8 / 1000)
  AND NOT coalesce(attempted_by[cardinality(attempted_by)] = ANY (@registered::text[]), false)
RETURNING id, kind, state, attempted_at, coalesce(attempted_by[cardinality(attempted_by)], '')::text AS owner;

-- name: RiverNotifyInsert :exec
-- Wakes the queue's River producers as River's own insert does, so that jobs made available
-- outside River are fetched at once rather than at the next poll.
SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', @queue::text)::text);

-- name: RiverJobRunningOwners :many
-- The River clients that run jobs of the queue (the last attempt of a running job is theirs) or
-- lead River's maintenance (its scheduler moves scheduled jobs, such as async deadlines, to
-- available): the owners ReactorListRunningJobOwners narrows to registered reactors.
SELECT j.attempted_by[cardinality(j.attempted_by)]::text AS owner
FROM river_job j
WHERE j.state = 'running' AND j.queue = @queue::text AND cardinality(j.attempted_by) > 0
UNION
SELECT l.leader_id::text FROM river_leader l;
