-- reckon:no-transaction
-- Effects still unclaimed after this (PENDING, no job, no lease) are what the older sweeper calls
-- "job gone": after the in-flight margin it makes them UNKNOWN and a status check decides, so
-- none is lost, though a connector without a status check leaves them for an operator. Stop the
-- enqueuers and let the reactors claim what waits before going down (docs/operations.md, Upgrades).
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_unclaimed_idx;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS queue;
