-- Effects and their audit trail. docs/design.md describes the contract: the five states, the legal
-- transitions between them, and an append-only record of every insert and transition.

CREATE TYPE reckon_effect_state AS ENUM ('PENDING', 'CONFIRMED', 'FAILED', 'UNKNOWN', 'STUCK');

CREATE TYPE reckon_effect_policy AS ENUM ('pure', 'idempotent', 'compensatable', 'irreversible');

CREATE TABLE reckon_effects (
    id               uuid PRIMARY KEY,
    tenant_id        text NOT NULL CHECK (tenant_id <> ''),
    connector        text NOT NULL CHECK (connector <> ''),
    args             jsonb NOT NULL DEFAULT '{}',
    idempotency_key  text NOT NULL CHECK (idempotency_key <> ''),
    business_key     text,
    policy           reckon_effect_policy NOT NULL,
    tags             text[] NOT NULL DEFAULT '{}' CHECK (
        tags <@ ARRAY['read', 'write', 'idempotent', 'destructive', 'external', 'expensive', 'network']
    ),
    state            reckon_effect_state NOT NULL DEFAULT 'PENDING',
    attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    result           jsonb,
    error            text,
    deadline_at      timestamptz,
    run_id           text,
    turn_id          uuid,
    turn_group       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(), -- the last insert or state change
    -- Inputs to the transition trigger, consumed by it: a statement that inserts an effect or
    -- changes its state names who did it and why here; the trigger copies them into
    -- reckon_effect_transitions and resets them to NULL, so they never carry over to the next
    -- transition. reckon_effect_transitions holds the history.
    transition_actor  text,
    transition_reason text,
    transition_detail jsonb,
    CONSTRAINT reckon_effects_idempotency_key_uniq UNIQUE (tenant_id, idempotency_key),
    CONSTRAINT reckon_effects_transition_consumed CHECK (
        transition_actor IS NULL AND transition_reason IS NULL AND transition_detail IS NULL
    ),
    CONSTRAINT reckon_effects_lease_complete CHECK (
        (lease_token IS NULL) = (lease_expires_at IS NULL) AND (lease_token IS NULL) = (lease_owner IS NULL)
    )
);

-- Reactors scan only unresolved effects; terminal rows never enter these indexes.
CREATE INDEX reckon_effects_unresolved_idx ON reckon_effects (state, updated_at)
    WHERE state IN ('PENDING', 'UNKNOWN', 'STUCK');
CREATE INDEX reckon_effects_run_idx ON reckon_effects (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX reckon_effects_turn_group_idx ON reckon_effects (turn_group) WHERE turn_group IS NOT NULL;

CREATE TABLE reckon_effect_transitions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    effect_id  uuid NOT NULL,
    tenant_id  text NOT NULL,
    from_state reckon_effect_state, -- NULL for the insert
    to_state   reckon_effect_state NOT NULL,
    actor      text NOT NULL,
    reason     text NOT NULL,
    attempt    integer NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    detail     jsonb
);

CREATE INDEX reckon_effect_transitions_effect_idx ON reckon_effect_transitions (effect_id, id);
CREATE INDEX reckon_effect_transitions_tenant_at_idx ON reckon_effect_transitions (tenant_id, at);

-- The legal transitions of the state machine (docs/design.md). A function rather than a table so that nobody can
-- widen the state machine with an INSERT.
CREATE FUNCTION reckon_effect_transition_allowed(from_state reckon_effect_state, to_state reckon_effect_state)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE from_state
        WHEN 'PENDING' THEN to_state IN ('CONFIRMED', 'FAILED', 'UNKNOWN')
        WHEN 'UNKNOWN' THEN to_state IN ('CONFIRMED', 'PENDING', 'FAILED', 'STUCK')
        WHEN 'STUCK'   THEN to_state IN ('CONFIRMED', 'FAILED', 'PENDING')
        ELSE false -- CONFIRMED and FAILED are terminal
    END
$$;

-- reckon_effect_transition guards every insert and state change of an effect:
--   * an effect is born PENDING;
--   * a state change must be allowed by reckon_effect_transition_allowed;
--   * every insert and state change names an actor and a reason (transition_actor and
--     transition_reason); it is recorded in reckon_effect_transitions and the inputs are reset.
-- An UPDATE that leaves the state as it was and names no actor, reason or detail (taking a lease,
-- counting an attempt) is not a transition: the trigger does not run and nothing is recorded. One
-- that names them asks for a transition to the same state, which is illegal. Errors use SQLSTATE
-- 23514 (check_violation) with constraint reckon_effect_transition and name the effect and both
-- states.
CREATE FUNCTION reckon_effect_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    from_label text := CASE WHEN TG_OP = 'INSERT' THEN '(new)' ELSE OLD.state::text END;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'PENDING' THEN
            RAISE EXCEPTION 'reckon: illegal effect transition (new) -> % (effect %): effects are created PENDING', NEW.state, NEW.id
                USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
        END IF;
    ELSIF NEW.state = OLD.state THEN
        RAISE EXCEPTION 'reckon: illegal effect transition % -> % (effect %): the state does not change', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
    ELSIF NOT reckon_effect_transition_allowed(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'reckon: illegal effect transition % -> % (effect %)', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition',
                  HINT = 'see reckon_effect_transition_allowed for the legal transitions';
    END IF;

    IF coalesce(NEW.transition_actor, '') = '' OR coalesce(NEW.transition_reason, '') = '' THEN
        RAISE EXCEPTION 'reckon: effect transition % -> % (effect %) needs transition_actor and transition_reason',
            from_label, NEW.state, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
    END IF;

    INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, detail)
    VALUES (NEW.id, NEW.tenant_id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.state END, NEW.state,
            NEW.transition_actor, NEW.transition_reason, NEW.attempts, NEW.transition_detail);

    NEW.updated_at := now();
    NEW.transition_actor := NULL;
    NEW.transition_reason := NULL;
    NEW.transition_detail := NULL;
    RETURN NEW;
END;
$$;

CREATE TRIGGER reckon_effect_insert
    BEFORE INSERT ON reckon_effects
    FOR EACH ROW EXECUTE FUNCTION reckon_effect_transition();

CREATE TRIGGER reckon_effect_transition
    BEFORE UPDATE ON reckon_effects
    FOR EACH ROW WHEN (
        OLD.state IS DISTINCT FROM NEW.state
        OR NEW.transition_actor IS NOT NULL
        OR NEW.transition_reason IS NOT NULL
        OR NEW.transition_detail IS NOT NULL
    )
    EXECUTE FUNCTION reckon_effect_transition();

-- The audit trail is append-only.
CREATE FUNCTION reckon_effect_transitions_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reckon: reckon_effect_transitions is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER reckon_effect_transitions_append_only
    BEFORE UPDATE OR DELETE ON reckon_effect_transitions
    FOR EACH ROW EXECUTE FUNCTION reckon_effect_transitions_append_only();

CREATE TRIGGER reckon_effect_transitions_no_truncate
    BEFORE TRUNCATE ON reckon_effect_transitions
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_effect_transitions_append_only();
