-- reckon:no-transaction
-- The operators' sessions listing (cmd/server/internal/ops Sessions): each tenant's turns by their
-- activity (the last message received or the completion, whichever is later), read backwards to
-- the latest turn of each session, newest first, instead of grouping the whole table. Built
-- CONCURRENTLY as in 0019. Its cost: about 75 bytes a turn (7.5 MB for 100k turns), and adding a
-- message to a turn (last_at) or completing it updates an indexed column, so those updates are no
-- longer HOT: every index of reckon_turns gets an entry.
DROP INDEX CONCURRENTLY IF EXISTS reckon_turns_activity_idx;
CREATE INDEX CONCURRENTLY reckon_turns_activity_idx
    ON reckon_turns (split_part(session_key, ':', 1), greatest(last_at, completed_at), session_key);
