DROP TABLE IF EXISTS reckon_turn_artifacts;
