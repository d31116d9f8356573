ALTER TABLE reckon_effects DROP COLUMN trace_context;
