-- reckon:no-transaction
-- Indexes for the operators' console and CLI (issue 17; cmd/server/internal/ops), built
-- CONCURRENTLY as in 0017 (each preceded by DROP INDEX CONCURRENTLY IF EXISTS, so that a rerun
-- after a failed build starts again).
--
-- Filtering effects by business key or by turn: partial indexes, so an effect without one costs
-- nothing more to insert (measured: docs/operations.md, `server effects`).
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_business_key_idx;
CREATE INDEX CONCURRENTLY reckon_effects_business_key_idx ON reckon_effects (tenant_id, business_key)
    WHERE business_key IS NOT NULL;

DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_turn_idx;
CREATE INDEX CONCURRENTLY reckon_effects_turn_idx ON reckon_effects (turn_id)
    WHERE turn_id IS NOT NULL;

-- The overview counts the effects settled in the last 24 hours per tenant, connector and state:
-- 0017's index of settled effects by age now carries those columns, so the count reads the index
-- alone (where the visibility map allows) instead of one heap page per effect. Retention's reads
-- use it as before. Same name, rebuilt: between the drop and the build retention finds settled
-- effects by a slower plan.
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_settled_idx;
CREATE INDEX CONCURRENTLY reckon_effects_settled_idx ON reckon_effects (updated_at) INCLUDE (tenant_id, connector, state)
    WHERE state IN ('CONFIRMED', 'FAILED');
