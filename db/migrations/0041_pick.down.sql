DROP FUNCTION IF EXISTS reckon_pick(boolean, timestamptz, timestamptz);
