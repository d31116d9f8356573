-- reckon:no-transaction
-- Indexes for the retention job (docs/operations.md): it deletes settled rows by age, so it scans
-- settled effects, finished sagas and turns, and runs by their age; deleting a turn checks that no
-- later turn still points at it through superseded_by.
--
-- Built CONCURRENTLY, outside a transaction (the marker above): these tables are the big ones, and
-- a plain CREATE INDEX would block their writes for the whole build. Each build is preceded by
-- DROP INDEX CONCURRENTLY IF EXISTS: a failed concurrent build leaves an INVALID index that IF NOT
-- EXISTS would keep, and this file runs again only after a failure, so the drop never throws away
-- a good index of ours (on a first run it drops nothing).

DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_settled_idx;
CREATE INDEX CONCURRENTLY reckon_effects_settled_idx ON reckon_effects (updated_at)
    WHERE state IN ('CONFIRMED', 'FAILED');

DROP INDEX CONCURRENTLY IF EXISTS reckon_sagas_finished_idx;
CREATE INDEX CONCURRENTLY reckon_sagas_finished_idx ON reckon_sagas (updated_at)
    WHERE state IN ('COMPLETED', 'COMPENSATED');

DROP INDEX CONCURRENTLY IF EXISTS reckon_runs_updated_idx;
CREATE INDEX CONCURRENTLY reckon_runs_updated_idx ON reckon_runs (updated_at);

DROP INDEX CONCURRENTLY IF EXISTS reckon_turns_finished_idx;
CREATE INDEX CONCURRENTLY reckon_turns_finished_idx ON reckon_turns (created_at)
    WHERE status IN ('COMPLETE', 'SUPERSEDED', 'FAILED');

DROP INDEX CONCURRENTLY IF EXISTS reckon_turns_superseded_by_idx;
CREATE INDEX CONCURRENTLY reckon_turns_superseded_by_idx ON reckon_turns (superseded_by)
    WHERE superseded_by IS NOT NULL;
