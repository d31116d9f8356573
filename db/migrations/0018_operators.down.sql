DROP TABLE IF EXISTS reckon_operator_sessions;
DROP TABLE IF EXISTS reckon_operators;
