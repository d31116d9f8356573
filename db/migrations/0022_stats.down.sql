DROP TABLE IF EXISTS reckon_stats;
