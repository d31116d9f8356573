-- name: RiverJobGetForUpdate :one
-- Locks an effect's River job so that no reactor can fetch it while an operator cancels the effect
-- (River fetches with FOR UPDATE SKIP LOCKED).
SELECT id, state, attempt FROM river_job WHERE id = @id FOR UPDATE;

