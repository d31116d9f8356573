-- Back to recording an effect's insert in a BEFORE INSERT trigger (0001), which records the
-- deduplicated inserts too. The marks of ghost rows go with reckon_audit_ghosts: the views show the
-- ghost rows again (the rows themselves were never touched).

CREATE OR REPLACE VIEW reckon_audit_transitions AS
SELECT t.id, t.effect_id, t.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key,
       e.run_id, t.from_state, t.to_state, t.actor, t.reason, t.attempt, t.at, t.detail,
       (t.from_state IS NOT DISTINCT FROM t.to_state) AS observation
FROM reckon_effect_transitions t
LEFT JOIN reckon_effects e ON e.id = t.effect_id;

CREATE OR REPLACE VIEW reckon_event_log AS
SELECT ev.xid, ev.seq, ev.type, ev.tenant_id, ev.session_key, ev.turn_id, ev.effect_id, ev.saga_id,
       ev.run_id, ev.payload, ev.at
FROM reckon_events ev
UNION ALL
SELECT t.xid, t.id,
       CASE
           WHEN t.from_state IS NULL THEN CASE
               WHEN e.compensates_id IS NOT NULL THEN 'effect.compensation'
               WHEN e.confirmation IS NOT NULL THEN 'effect.awaiting_confirmation'
               ELSE 'tool.authorized' END
           WHEN t.from_state = t.to_state THEN 'effect.observed'
           WHEN t.to_state = 'CONFIRMED' THEN 'tool.executed'
           WHEN t.to_state = 'FAILED' THEN 'tool.failed'
           WHEN t.to_state = 'UNKNOWN' THEN 'effect.unknown'
           WHEN t.to_state = 'STUCK' THEN 'effect.stuck'
           ELSE 'effect.retried'
       END,
       t.tenant_id, tu.session_key, e.turn_id, t.effect_id, NULL::uuid, e.run_id,
       jsonb_strip_nulls(jsonb_build_object('connector', e.connector, 'policy', e.policy, 'state', t.to_state,
           'from', t.from_state, 'actor', t.actor, 'reason', t.reason, 'attempt', t.attempt,
           'idempotency_key', e.idempotency_key, 'business_key', e.business_key,
           'compensates_id', e.compensates_id, 'detail', t.detail)),
       t.at
FROM reckon_effect_transitions t
LEFT JOIN reckon_effects e ON e.id = t.effect_id
LEFT JOIN reckon_turns tu ON tu.id = e.turn_id
WHERE t.xid IS NOT NULL;

DROP TABLE reckon_audit_ghosts;

LOCK TABLE reckon_effects IN ACCESS EXCLUSIVE MODE;

DROP TRIGGER reckon_effect_insert ON reckon_effects;
DROP TRIGGER reckon_effect_insert_check ON reckon_effects;
DROP FUNCTION reckon_effect_insert_record();
DROP FUNCTION reckon_effect_insert_check();
-- The inputs still held were recorded already.
ALTER TABLE reckon_effects DROP COLUMN insert_inputs;

CREATE OR REPLACE FUNCTION reckon_effect_transition() RETURNS trigger
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
