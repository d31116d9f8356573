-- The part of River's schema that Reckon's queries read, declared here for sqlc only. It is never
-- applied: River's own migrations (rivermigrate, run by db.Migrator) create these objects.
CREATE TYPE river_job_state AS ENUM (
    'available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled'
);

CREATE TABLE river_job (
    id           bigint PRIMARY KEY,
    state        river_job_state NOT NULL,
    attempt      smallint NOT NULL,
    max_attempts smallint NOT NULL,
    attempted_at timestamptz,
    finalized_at timestamptz,
    scheduled_at timestamptz NOT NULL,
    kind         text NOT NULL,
    queue        text NOT NULL,
    args         jsonb,
    attempted_by text[],
    errors       jsonb[],
    metadata     jsonb NOT NULL
);

CREATE TABLE river_leader (
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    leader_id  text NOT NULL,
    name       text PRIMARY KEY
);
