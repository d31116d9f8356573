-- Redrive (docs/design.md, "The effect state machine"): an operator sends a FAILED effect back to
-- PENDING, with a fresh attempt budget and the same idempotency key. FAILED stays terminal for
-- everyone else: the transition is legal only when the writer names an operator as its actor
-- (transition_actor 'operator:…', as every operator action in effects writes it).
-- reckon_effect_transition_allowed keeps its two arguments (the pairs anybody may write); the
-- operator-only pair is checked here, in the one trigger that guards every state change. Otherwise
-- as 0031: same refusals, same SQLSTATE 23514 with constraint reckon_effect_transition.
CREATE OR REPLACE FUNCTION reckon_effect_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = OLD.state THEN
        RAISE EXCEPTION 'reckon: illegal effect transition % -> % (effect %): the state does not change', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
    ELSIF OLD.state = 'FAILED' AND NEW.state = 'PENDING' THEN
        IF coalesce(NEW.transition_actor, '') NOT LIKE 'operator:_%' THEN
            RAISE EXCEPTION 'reckon: illegal effect transition % -> % (effect %): only an operator redrives a FAILED effect (actor %)',
                OLD.state, NEW.state, OLD.id, coalesce(NEW.transition_actor, '(none)')
                USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition',
                      HINT = 'a redrive names an actor operator:{name}';
        END IF;
    ELSIF NOT reckon_effect_transition_allowed(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'reckon: illegal effect transition % -> % (effect %)', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition',
                  HINT = 'see reckon_effect_transition_allowed for the legal transitions';
    END IF;

    IF coalesce(NEW.transition_actor, '') = '' OR coalesce(NEW.transition_reason, '') = '' THEN
        RAISE EXCEPTION 'reckon: effect transition % -> % (effect %) needs transition_actor and transition_reason',
            OLD.state, NEW.state, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
    END IF;

    INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, detail)
    VALUES (NEW.id, NEW.tenant_id, OLD.state, NEW.state, NEW.transition_actor, NEW.transition_reason, NEW.attempts,
            NEW.transition_detail);

    NEW.updated_at := now();
    NEW.transition_actor := NULL;
    NEW.transition_reason := NULL;
    NEW.transition_detail := NULL;
    NEW.insert_inputs := NULL;
    RETURN NEW;
END;
$$;
