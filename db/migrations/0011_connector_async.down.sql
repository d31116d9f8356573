ALTER TABLE reckon_connectors
    DROP COLUMN cancel_url,
    DROP COLUMN hard_timeout,
    DROP COLUMN async_timeout_ms;
