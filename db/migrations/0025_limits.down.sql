DROP FUNCTION IF EXISTS reckon_limit_release(text, text, uuid, boolean, integer, integer, boolean, integer);
DROP FUNCTION IF EXISTS reckon_limit_acquire(text, text, uuid, timestamptz, integer, integer, integer, integer, boolean, integer, integer, integer, integer);
DROP TABLE IF EXISTS reckon_limit_waiters;
DROP TABLE IF EXISTS reckon_limit_slots;
DROP TABLE IF EXISTS reckon_limit_state;
DROP TABLE IF EXISTS reckon_connector_limits;
