DROP TABLE reckon_runs;
DROP INDEX reckon_effects_correlation_idx;
ALTER TABLE reckon_effects
    DROP COLUMN async_hard_timeout,
    DROP COLUMN async_timeout_ms,
    DROP COLUMN correlation_id;
