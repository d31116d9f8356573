DROP TRIGGER IF EXISTS reckon_effect_settled ON reckon_effects;
DROP FUNCTION IF EXISTS reckon_effect_notify_settled();
DROP INDEX IF EXISTS reckon_effects_created_idx;
DROP INDEX IF EXISTS reckon_effects_lease_idx;
DROP INDEX IF EXISTS reckon_effects_compensates_idx;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS compensates_id, DROP COLUMN IF EXISTS timeout_ms, DROP COLUMN IF EXISTS job_id;
