-- Sagas (docs/sagas.md) and the settle hooks they advance by.

-- The component that owns an effect (e.g. 'saga'). effects calls the owner's settle hook inside
-- the transaction that moves an owned effect to CONFIRMED, FAILED or STUCK, and refuses that write
-- when the process has no hook for the owner. NULL: nobody is told.
ALTER TABLE reckon_effects ADD COLUMN owner text CHECK (owner <> '');

CREATE TYPE reckon_saga_state AS ENUM ('RUNNING', 'COMPLETED', 'COMPENSATING', 'COMPENSATED', 'STUCK');

-- The state of one step: its effect in flight (RUNNING), settled (CONFIRMED, FAILED, STUCK), or
-- being undone (COMPENSATING, then COMPENSATED; COMPENSATION_STUCK when its compensation could not
-- be confirmed).
CREATE TYPE reckon_saga_step_state AS ENUM (
    'RUNNING', 'CONFIRMED', 'FAILED', 'STUCK', 'COMPENSATING', 'COMPENSATED', 'COMPENSATION_STUCK'
);

CREATE TABLE reckon_sagas (
    id           uuid PRIMARY KEY,
    tenant_id    text NOT NULL CHECK (tenant_id <> ''),
    name         text NOT NULL CHECK (name <> ''),
    -- Optional idempotency key of the start: starting again with the same key returns this saga.
    start_key    text CHECK (start_key <> ''),
    input        jsonb NOT NULL DEFAULT '{}',
    state        reckon_saga_state NOT NULL DEFAULT 'RUNNING',
    step_count   integer NOT NULL CHECK (step_count >= 1),
    -- The step running (RUNNING), being compensated (COMPENSATING) or holding the saga (STUCK).
    current_step integer NOT NULL DEFAULT 0 CHECK (current_step >= 0 AND current_step < step_count),
    -- Why the saga compensates: the failure of a step.
    error        text,
    -- Why the saga is STUCK, while it is.
    stuck_reason text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reckon_sagas_start_key_uniq UNIQUE (tenant_id, start_key)
);

CREATE INDEX reckon_sagas_created_idx ON reckon_sagas (tenant_id, created_at, id);
CREATE INDEX reckon_sagas_unfinished_idx ON reckon_sagas (state, updated_at)
    WHERE state IN ('RUNNING', 'COMPENSATING', 'STUCK');

CREATE TABLE reckon_saga_steps (
    saga_id                  uuid NOT NULL REFERENCES reckon_sagas (id) ON DELETE CASCADE,
    idx                      integer NOT NULL CHECK (idx >= 0),
    name                     text NOT NULL,
    state                    reckon_saga_step_state NOT NULL DEFAULT 'RUNNING',
    effect_id                uuid NOT NULL REFERENCES reckon_effects (id),
    result                   jsonb,
    -- The latest compensation effect of the step, and how many have been enqueued.
    compensation_effect_id   uuid REFERENCES reckon_effects (id),
    compensation_attempts    integer NOT NULL DEFAULT 0 CHECK (compensation_attempts >= 0),
    -- compensation_attempts when an operator last gave the step a fresh budget: the budget counts
    -- the compensations since (the numbering of their keys goes on).
    compensation_budget_base integer NOT NULL DEFAULT 0 CHECK (compensation_budget_base >= 0),
    compensation_result      jsonb,
    error                    text,
    updated_at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (saga_id, idx)
);

CREATE UNIQUE INDEX reckon_saga_steps_effect_idx ON reckon_saga_steps (effect_id);
CREATE UNIQUE INDEX reckon_saga_steps_compensation_idx ON reckon_saga_steps (compensation_effect_id)
    WHERE compensation_effect_id IS NOT NULL;

-- Every change of a saga's state, append-only, with who and why.
CREATE TABLE reckon_saga_transitions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    saga_id    uuid NOT NULL REFERENCES reckon_sagas (id) ON DELETE CASCADE,
    from_state reckon_saga_state, -- NULL for the start
    to_state   reckon_saga_state NOT NULL,
    step       integer NOT NULL,
    actor      text NOT NULL CHECK (actor <> ''),
    reason     text NOT NULL CHECK (reason <> ''),
    at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reckon_saga_transitions_saga_idx ON reckon_saga_transitions (saga_id, id);

-- Saga.Wait listens on reckon_saga_settled: the id of a saga that has just become COMPLETED,
-- COMPENSATED or STUCK, delivered when the transaction commits.
CREATE FUNCTION reckon_saga_notify_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state AND NEW.state IN ('COMPLETED', 'COMPENSATED', 'STUCK') THEN
        PERFORM pg_notify('reckon_saga_settled', NEW.id::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_saga_settled
    AFTER UPDATE ON reckon_sagas
    FOR EACH ROW EXECUTE FUNCTION reckon_saga_notify_settled();
