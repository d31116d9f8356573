DROP FUNCTION IF EXISTS reckon_connector_resume(text, text, text, text);
DROP FUNCTION IF EXISTS reckon_connector_pause(text, text, text, text);
DROP FUNCTION IF EXISTS reckon_limit_acquire_unpaused(text, text, uuid, timestamptz, integer, integer, integer, integer, boolean, integer, integer, integer, integer);
DROP TABLE IF EXISTS reckon_connector_pause_log;
DROP TABLE IF EXISTS reckon_connector_pauses;
