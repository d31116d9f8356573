-- reckon:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_ordering_idx;
