DROP TABLE IF EXISTS reckon_schedules;
