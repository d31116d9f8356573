-- reckon:no-transaction
ALTER TABLE reckon_connectors DROP COLUMN IF EXISTS dedup_by_business_key;
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_business_key_uniq;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS business_key_dedup;
