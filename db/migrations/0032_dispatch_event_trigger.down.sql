-- Dispatches no longer write effect.dispatched events (0027's function stays, until 0027 goes).
DROP TRIGGER IF EXISTS reckon_dispatch_event ON river_job;
