DROP TABLE IF EXISTS reckon_saga_definitions;
