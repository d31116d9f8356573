-- Schedules (docs/design.md "Schedules"): periodic effects defined in the database. Every reactor's
-- scheduler (package schedule) locks the schedules whose next tick is due (FOR UPDATE SKIP LOCKED),
-- enqueues each due tick's effect with the tick in its idempotency key
-- (schedule/<name>/<tick RFC 3339>) and advances next_tick, in one transaction: a tick is enqueued
-- once across any number of reactors, and a reactor killed mid-way leaves nothing of its round.
-- A schedule has a cron expression (5 fields or a descriptor such as @hourly, optionally prefixed
-- CRON_TZ=<zone>) or an interval in whole seconds, never both; missed says what happens to the ticks
-- missed while no scheduler ran (skip: the latest only; catch_up: each, oldest first, bounded).
CREATE TABLE reckon_schedules (
    tenant_id        text NOT NULL CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    name             text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$' AND length(name) <= 200),
    connector        text NOT NULL CHECK (connector <> ''),
    args             jsonb NOT NULL DEFAULT '{}',
    cron             text,
    interval_seconds integer CHECK (interval_seconds >= 1),
    missed           text NOT NULL DEFAULT 'skip' CHECK (missed IN ('skip', 'catch_up')),
    enabled          boolean NOT NULL DEFAULT true,
    next_tick        timestamptz NOT NULL,
    last_tick        timestamptz,
    last_effect_id   uuid, -- no foreign key: retention prunes effects
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    created_by       text NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    updated_by       text NOT NULL,
    PRIMARY KEY (tenant_id, name),
    CHECK ((cron IS NULL) <> (interval_seconds IS NULL))
);

-- The schedulers' question, every round: which enabled schedules are due.
CREATE INDEX reckon_schedules_due ON reckon_schedules (next_tick) WHERE enabled;
