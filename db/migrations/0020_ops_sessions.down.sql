-- reckon:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS reckon_turns_activity_idx;
