DROP TABLE IF EXISTS reckon_connectors;
