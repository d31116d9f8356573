-- Back to 0031's reckon_effect_transition: FAILED is terminal for everyone, operators included.
-- Effects redriven while 0037 was applied keep their history (a FAILED -> PENDING row by an
-- operator) and go on as any PENDING effect.
CREATE OR REPLACE FUNCTION reckon_effect_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = OLD.state THEN
        RAISE EXCEPTION 'reckon: illegal effect transition % -> % (effect %): the state does not change', OLD.state, NEW.state, OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
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
