-- reckon:no-transaction
-- The unsettled effects of each ordering key in order (0035_ordering_keys): the enqueue's check,
-- the hand-on and "held by". Built CONCURRENTLY, so writers never wait for its table read; the
-- drop before it clears an INVALID index that a failed build left (db.Migration).
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_ordering_idx;
CREATE INDEX CONCURRENTLY reckon_effects_ordering_idx ON reckon_effects (tenant_id, ordering_key, order_seq)
    WHERE ordering_key IS NOT NULL AND state IN ('PENDING', 'UNKNOWN', 'STUCK');
