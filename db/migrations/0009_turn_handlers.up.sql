-- Turns for teams in other languages (POST /v1/sessions/{key}/messages, the reactor's HTTP turn
-- handler): the sender's own time of an inbound message, as the caller gives it ("at"). It is
-- recorded for the handler; aggregation windows run on received_at, the database's clock.
ALTER TABLE reckon_messages ADD COLUMN sent_at timestamptz;

-- Where a tenant's turns go: the HTTP turn handler of package turns/httpturn, managed with
-- PUT/GET/DELETE /v1/turn-handlers/{tenant}. A reactor's -turn-handler-url serves the tenants
-- without a row.
CREATE TABLE reckon_turn_handlers (
    tenant_id  text PRIMARY KEY REFERENCES reckon_tenants (id) ON DELETE CASCADE,
    url        text NOT NULL CHECK (url ~ '^https?://.'),
    timeout_ms integer NOT NULL CHECK (timeout_ms BETWEEN 1 AND 600000),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
