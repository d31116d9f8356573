-- Reactors: every started effects client (a reactor) registers here and, for as long as it lives,
-- holds a session advisory lock keyed by its id, pg_advisory_lock(0x52434b52, hashtext(id)), on a
-- connection of its own. Postgres frees the lock the instant the process or its connection dies,
-- so another reactor that can take the lock knows the owner is gone and hands its running River
-- jobs back at once instead of waiting for River's rescuer (an hour). See docs/design.md,
-- "Dead reactors".
CREATE TABLE reckon_reactors (
    id              text PRIMARY KEY CHECK (id <> ''),
    queue           text NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    -- Written every second on the lock's connection: the last sign of life.
    heartbeat_at    timestamptz NOT NULL DEFAULT now(),
    -- Set once, by the reactor that found this one dead and took its jobs over. A reactor that
    -- finds it set on itself (it lost its connection and was taken for dead) stops its work.
    dead_at         timestamptz,
    taken_over_by   text,
    jobs_taken_over integer NOT NULL DEFAULT 0
);
