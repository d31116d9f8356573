-- reckon:no-transaction
-- Business-key dedup (docs/design.md, "Idempotency: four layers"): a connector may declare that
-- its business key deduplicates. Its effects are recorded with business_key_dedup = true (a
-- compensation never is: it has its original's business key), and the partial unique index below
-- lets one effect at a time that is not FAILED hold a (tenant, connector, business key). The
-- enqueue's insert skips a row the index refuses (ON CONFLICT DO NOTHING), and the enqueue returns
-- the holder as a replay, or refuses with ErrBusinessKeyConflict when the args differ. A constant
-- default: adding the column rewrites no rows, and every existing row is outside the index.
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS business_key_dedup boolean NOT NULL DEFAULT false;

-- Built without blocking writers; no existing row is in it (the column is new), so the build only
-- reads the table.
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_business_key_uniq;
CREATE UNIQUE INDEX CONCURRENTLY reckon_effects_business_key_uniq ON reckon_effects (tenant_id, connector, business_key)
    WHERE business_key_dedup AND state <> 'FAILED';

-- A stored HTTP connector declares it as a Go connector does (Connector.DedupByBusinessKey).
ALTER TABLE reckon_connectors ADD COLUMN IF NOT EXISTS dedup_by_business_key boolean NOT NULL DEFAULT false;
