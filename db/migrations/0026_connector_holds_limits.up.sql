-- An HTTP connector's confirmation hold (docs/design.md, "Confirmation holds") and its own limits
-- (docs/design.md, "Limits"), as effects.Connector holds them for a Go connector. Constant
-- defaults: adding the columns rewrites no rows.
ALTER TABLE reckon_connectors
    ADD COLUMN requires_confirmation boolean NOT NULL DEFAULT false,
    ADD COLUMN confirmation_prompt text CHECK (confirmation_prompt <> '' AND length(confirmation_prompt) <= 2000),
    ADD COLUMN limit_rate integer NOT NULL DEFAULT 0 CHECK (limit_rate >= 0),
    ADD COLUMN limit_per_ms integer NOT NULL DEFAULT 1000 CHECK (limit_per_ms > 0),
    ADD COLUMN limit_burst integer NOT NULL DEFAULT 0 CHECK (limit_burst >= 0),
    ADD COLUMN limit_max_in_flight integer NOT NULL DEFAULT 0 CHECK (limit_max_in_flight >= 0),
    ADD COLUMN limit_per_tenant boolean NOT NULL DEFAULT false,
    ADD COLUMN limit_break_after integer NOT NULL DEFAULT 0 CHECK (limit_break_after >= 0),
    ADD COLUMN limit_break_for_ms integer NOT NULL DEFAULT 30000 CHECK (limit_break_for_ms > 0);
