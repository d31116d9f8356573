-- reckon:no-transaction
-- Dropped CONCURRENTLY too, so that rolling back does not block writes to the big tables; IF
-- EXISTS lets a rollback that failed half-way run again.

DROP INDEX CONCURRENTLY IF EXISTS reckon_turns_superseded_by_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_turns_finished_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_runs_updated_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_sagas_finished_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_settled_idx;
