-- reckon:no-transaction
-- Confirmation holds (docs/design.md, "Confirmation holds"): an effect that needs a person's
-- confirmation is recorded PENDING with confirmation = 'AWAITING' and is not dispatched until it
-- is confirmed. The hold is the database's: while an effect awaits, reckon_effects_hold_check
-- refuses it a job, a lease or an attempt, whatever a worker does. The decision — CONFIRMED,
-- DECLINED (the effect FAILED) or EXPIRED (FAILED, "confirmation expired") — is kept with who made it,
-- when and why. The columns are nullable without defaults: adding them rewrites no rows.
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation text;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation_prompt text;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation_expires_at timestamptz;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation_by text;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation_at timestamptz;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation_reason text;
-- The four-eyes rule of the enqueuing client, kept with the effect so that every process that may
-- confirm it (a server, a CLI, a console) applies the same rule. A constant default: no rewrite.
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS confirmation_four_eyes boolean NOT NULL DEFAULT false;

-- Added NOT VALID (a brief lock) and validated apart (a scan that does not block writes).
ALTER TABLE reckon_effects DROP CONSTRAINT IF EXISTS reckon_effects_confirmation_check;
ALTER TABLE reckon_effects ADD CONSTRAINT reckon_effects_confirmation_check
    CHECK (confirmation IN ('AWAITING', 'CONFIRMED', 'DECLINED', 'EXPIRED')) NOT VALID;
ALTER TABLE reckon_effects VALIDATE CONSTRAINT reckon_effects_confirmation_check;
ALTER TABLE reckon_effects DROP CONSTRAINT IF EXISTS reckon_effects_hold_check;
ALTER TABLE reckon_effects ADD CONSTRAINT reckon_effects_hold_check
    CHECK (confirmation IS DISTINCT FROM 'AWAITING' OR (job_id IS NULL AND lease_token IS NULL AND attempts = 0)) NOT VALID;
ALTER TABLE reckon_effects VALIDATE CONSTRAINT reckon_effects_hold_check;

-- The claimers read the effects they may claim from here: unclaimed and not held.
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_claimable_idx;
CREATE INDEX CONCURRENTLY reckon_effects_claimable_idx ON reckon_effects (queue, created_at)
    WHERE state = 'PENDING' AND job_id IS NULL AND lease_token IS NULL AND confirmation IS DISTINCT FROM 'AWAITING';
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_unclaimed_idx;

-- Effects awaiting confirmation: listings, the metrics and the expiry.
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_awaiting_confirmation_idx;
CREATE INDEX CONCURRENTLY reckon_effects_awaiting_confirmation_idx ON reckon_effects (confirmation_expires_at, created_at)
    WHERE confirmation = 'AWAITING';
