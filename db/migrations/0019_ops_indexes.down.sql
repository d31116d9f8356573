-- reckon:no-transaction
-- Dropped CONCURRENTLY; 0017's index of settled effects is built again as 0017 made it.

DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_turn_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_business_key_idx;
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_settled_idx;
CREATE INDEX CONCURRENTLY reckon_effects_settled_idx ON reckon_effects (updated_at)
    WHERE state IN ('CONFIRMED', 'FAILED');
