-- The trigger of 0027's dispatch events (reckon_dispatch_event on river_job), in a transaction of
-- its own: the running code takes river_job and reckon_effects in both orders (an enqueue inserts
-- the dispatch job, then stamps the effect; a group commit settles effects, then completes their
-- jobs), so a migration that locked both at once could wait for a writer that waits for it — the
-- deadlocks of online upgrades through 0027, which created it with its triggers on reckon_effects.
-- This transaction takes river_job alone (SHARE ROW EXCLUSIVE, within the migrator's lock_timeout).
-- A database migrated by 0027 before the move has the trigger already, and keeps it untouched.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'reckon_dispatch_event' AND tgrelid = 'river_job'::regclass) THEN
        CREATE TRIGGER reckon_dispatch_event
            AFTER UPDATE OF state ON river_job
            FOR EACH ROW WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running' AND NEW.kind = 'reckon_dispatch')
            EXECUTE FUNCTION reckon_dispatch_event();
    END IF;
END;
$$;
