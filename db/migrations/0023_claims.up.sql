-- reckon:no-transaction
-- Effects enqueued one at a time are left for the reactors to claim into shared dispatch jobs
-- (effects/claim.go; docs/design.md, "Claiming"). Such an effect is PENDING with no job and no
-- lease; queue names the River queue whose reactors claim it. queue is nullable with no default,
-- so adding it rewrites no rows; effects enqueued before it got their job at enqueue and never
-- need it.
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS queue text;

-- A claimer reads the oldest unclaimed effects of its queue from here. The index holds only the
-- effects waiting to be claimed, so it stays as small as the backlog.
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_unclaimed_idx;
CREATE INDEX CONCURRENTLY reckon_effects_unclaimed_idx ON reckon_effects (queue, created_at)
    WHERE state = 'PENDING' AND job_id IS NULL AND lease_token IS NULL;
