-- Declarative saga definitions (docs/sagas.md, for teams not writing Go): a saga's ordered
-- steps, each naming a connector (HTTP or Go) and how to undo it, stored as rows and loaded into
-- the saga clients of servers and reactors (package saga/sagadef). Shared by all tenants, like
-- connectors. A definition never changes once stored: sagas in flight rely on its steps, so a new
-- version is a new name.

CREATE TABLE reckon_saga_definitions (
    name                  text PRIMARY KEY CHECK (name <> '' AND length(name) <= 200),
    -- [{"name","connector","undo"}…] in order; undo is "connector", "none" or {"connector": name}.
    steps                 jsonb NOT NULL CHECK (jsonb_typeof(steps) = 'array' AND jsonb_array_length(steps) >= 1),
    -- Compensation effects enqueued per step before the saga is STUCK; 0: the saga default.
    compensation_attempts integer NOT NULL DEFAULT 0 CHECK (compensation_attempts BETWEEN 0 AND 100),
    created_at            timestamptz NOT NULL DEFAULT now()
);
