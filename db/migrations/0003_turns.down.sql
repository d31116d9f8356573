DROP TABLE IF EXISTS reckon_turn_decisions;
DROP TABLE IF EXISTS reckon_messages;
DROP TABLE IF EXISTS reckon_turns;
DROP TYPE IF EXISTS reckon_turn_status;
