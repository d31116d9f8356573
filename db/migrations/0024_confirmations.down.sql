-- reckon:no-transaction
-- Effects still awaiting confirmation would be claimed and dispatched by the claimers of 0023 once
-- the hold is gone: decline or confirm them before going down.
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_awaiting_confirmation_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_unclaimed_idx;
CREATE INDEX CONCURRENTLY reckon_effects_unclaimed_idx ON reckon_effects (queue, created_at)
    WHERE state = 'PENDING' AND job_id IS NULL AND lease_token IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_claimable_idx;
ALTER TABLE reckon_effects DROP CONSTRAINT IF EXISTS reckon_effects_hold_check;
ALTER TABLE reckon_effects DROP CONSTRAINT IF EXISTS reckon_effects_confirmation_check;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation_four_eyes;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation_reason;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation_at;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation_by;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation_expires_at;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation_prompt;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS confirmation;
