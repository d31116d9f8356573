-- name: RiverJobGetForUpdate :one
-- Locks an effect's River job so that no reactor can fetch it while an operator cancels the effect
-- (River fetches with FOR UPDATE SKIP LOCKED).
-- shared: a batch dispatch job, carrying other effects too.
SELECT id, state, attempt, (args ? 'effect_ids')::boolean AS shared FROM river_job WHERE id = @id FOR UPDATE;

