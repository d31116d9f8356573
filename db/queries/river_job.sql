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
    scheduled_at = CASE WHEN metadata ? 'cancel_attempted_at' OR attempt >= max_attempts THEN scheduled_at ELSE now() END,
    finalized_at = CASE WHEN metadata ? 'cancel_attempted_at' OR attempt >= max_attempts THEN now() END,
    errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', @error::text, 'trace', '')),
    metadata = metadata || jsonb_build_object('reckon:taken_over_from', @owner::text)
WHERE state = 'running' AND queue = @queue::text AND attempted_by[cardinality(attempted_by)] = @owner::text
RETURNING id, kind, state, attempted_at;

-- name: RiverNotifyInsert :exec
-- Wakes the queue's River producers as River's own insert does, so that jobs made available
-- outside River are fetched at once rather than at the next poll.
SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', @queue::text)::text);
