DROP TABLE IF EXISTS reckon_reactors;
