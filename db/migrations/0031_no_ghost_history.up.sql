-- No record of what did not happen (docs/audit.md, "Every row tells of something that happened").
--
-- Until now an effect's insert was recorded by a BEFORE INSERT row trigger. The enqueue inserts
-- with ON CONFLICT DO NOTHING, and Postgres runs BEFORE INSERT row triggers before it looks for a
-- conflict: a deduplicated enqueue wrote a '(new) -> PENDING' row to reckon_effect_transitions
-- (and so an event to reckon_event_log) for an effect id that was never inserted — a ghost.
--
-- From here:
--   * reckon_effect_insert_check, BEFORE INSERT, still refuses an effect born in any state but
--     PENDING and an insert that names no actor or reason, and consumes the inputs
--     (transition_actor, transition_reason, transition_detail) as before, but writes nothing: it
--     moves them to insert_inputs.
--   * reckon_effect_insert, now AFTER INSERT, records the insert from insert_inputs. AFTER row
--     triggers fire only for rows that were stored, so a row skipped by ON CONFLICT (or a WHERE)
--     records nothing. It is named to fire before reckon_effect_leased_insert_event (triggers of
--     one event fire in name order), so an effect recorded by Do is 'recorded' before it is
--     'dispatched' in the stream.
--   * insert_inputs is needed because an AFTER trigger sees the row as stored and cannot change it.
--     It holds the insert's inputs as one jsonb value until the effect's first transition clears it
--     (reckon_effect_transition, which is otherwise unchanged: the transition inputs keep their
--     meaning, and a state change that names none is still refused). Adding a nullable column
--     rewrites nothing.
--
-- The sweep for other tables: every other trigger that writes history or events (turns, messages,
-- supersede decisions, sagas and their transitions, runs, dispatches, progress) is an AFTER row
-- trigger already, and fires only for rows that were written; the Go code writes a saga's first
-- transition only after its insert returned a row, and audit observations only for an effect that
-- exists (db/queries). Nothing else can write a row about a change that did not happen.
--
-- The ghosts already written are marked, not removed: reckon_effect_transitions is append-only and
-- stays so (no trigger is disabled, no row deleted). reckon_audit_ghosts, append-only too, lists
-- each ghost row with who marked it and why; reckon_audit_transitions and reckon_event_log leave
-- the marked rows out. A row is a ghost when it records an insert ('(new) -> PENDING') of an
-- effect that does not exist and nothing else is recorded of that effect: no other transition,
-- no tombstone, and no partition dropped after it. Retention prunes only settled effects, so the
-- history of a pruned effect holds its settling transition — unless retention dropped the
-- partition that held it, and then the row is not marked (it may be true history).
--
-- Online: the full scan for ghosts runs first, before any lock but ACCESS SHARE. Then the views
-- (readers lock a view before its tables), then reckon_effects (ACCESS EXCLUSIVE, for the triggers:
-- enqueues wait here, as they lock reckon_effects before the audit tables), then a second scan of
-- only the rows written by transactions the first scan could not see (by xid). Once the new
-- triggers commit no new ghost can be written, and every transaction that wrote one ended before
-- this one took reckon_effects. Every statement can run again in a retried transaction.

CREATE TABLE IF NOT EXISTS reckon_audit_ghosts (
    transition_id bigint PRIMARY KEY,  -- reckon_effect_transitions.id of the ghost row
    effect_id     uuid NOT NULL,       -- the effect id it names, which never existed
    tenant_id     text NOT NULL,
    at            timestamptz NOT NULL, -- when the ghost row was written
    marked_at     timestamptz NOT NULL DEFAULT now(),
    marked_by     text NOT NULL CHECK (marked_by <> ''),
    reason        text NOT NULL CHECK (reason <> '')
);

DROP TRIGGER IF EXISTS reckon_audit_ghosts_append_only ON reckon_audit_ghosts;
CREATE TRIGGER reckon_audit_ghosts_append_only
    BEFORE UPDATE OR DELETE ON reckon_audit_ghosts
    FOR EACH ROW EXECUTE FUNCTION reckon_audit_append_only();
DROP TRIGGER IF EXISTS reckon_audit_ghosts_no_truncate ON reckon_audit_ghosts;
CREATE TRIGGER reckon_audit_ghosts_no_truncate
    BEFORE TRUNCATE ON reckon_audit_ghosts
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only();

-- reckon_audit_mark_ghosts marks the ghost rows written by transactions at or after since_xid
-- (all of them when NULL) and returns how many it marked. Rows marked already are left alone. It
-- serves this migration only and is dropped at its end.
CREATE OR REPLACE FUNCTION reckon_audit_mark_ghosts(since_xid xid8) RETURNS bigint
LANGUAGE sql AS $$
    WITH marked AS (
        INSERT INTO reckon_audit_ghosts (transition_id, effect_id, tenant_id, at, marked_by, reason)
        SELECT t.id, t.effect_id, t.tenant_id, t.at, 'migration 0031_no_ghost_history',
               'a deduplicated enqueue recorded the insert of an effect that was never inserted (a BEFORE INSERT trigger before migration 0031)'
        FROM reckon_effect_transitions t
        WHERE t.from_state IS NULL
          AND (since_xid IS NULL OR t.xid >= since_xid)
          AND NOT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.id = t.effect_id)
          AND NOT EXISTS (SELECT 1 FROM reckon_effect_transitions o WHERE o.effect_id = t.effect_id AND o.id <> t.id)
          AND NOT EXISTS (SELECT 1 FROM reckon_effect_tombstones tb WHERE tb.effect_id = t.effect_id)
          AND NOT EXISTS (SELECT 1 FROM reckon_audit_drops d
                          WHERE d.parent = 'reckon_effect_transitions' AND d.range_to > t.at)
        ON CONFLICT (transition_id) DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM marked
$$;

-- The first scan, and where the second starts: every transaction this scan may not see has an xid
-- at or above the oldest one running when the scan starts.
-- It is kept in a setting local to this transaction.
SELECT set_config('reckon.ghost_scan_since', pg_snapshot_xmin(pg_current_snapshot())::text, true);
SELECT reckon_audit_mark_ghosts(NULL);

-- The views leave marked rows out. The test is evaluated only for rows whose effect is gone.
CREATE OR REPLACE VIEW reckon_audit_transitions AS
SELECT t.id, t.effect_id, t.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key,
       e.run_id, t.from_state, t.to_state, t.actor, t.reason, t.attempt, t.at, t.detail,
       (t.from_state IS NOT DISTINCT FROM t.to_state) AS observation
FROM reckon_effect_transitions t
LEFT JOIN reckon_effects e ON e.id = t.effect_id
WHERE e.id IS NOT NULL OR NOT EXISTS (SELECT 1 FROM reckon_audit_ghosts g WHERE g.transition_id = t.id);

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
WHERE t.xid IS NOT NULL
  AND (e.id IS NOT NULL OR NOT EXISTS (SELECT 1 FROM reckon_audit_ghosts g WHERE g.transition_id = t.id));

-- The triggers. reckon_effects first, as the enqueue locks it before the audit tables.
LOCK TABLE reckon_effects IN ACCESS EXCLUSIVE MODE;

-- The insert's inputs, from reckon_effect_insert_check to reckon_effect_insert.
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS insert_inputs jsonb;
COMMENT ON COLUMN reckon_effects.insert_inputs IS
    'The insert''s actor, reason and detail, kept by the BEFORE INSERT check for the AFTER INSERT trigger that records them; cleared by the first transition (migration 0031)';
ALTER TABLE reckon_effects DROP CONSTRAINT IF EXISTS reckon_effects_insert_inputs_pending;
-- NOT VALID: every row stored before has none, so the scan could only succeed.
ALTER TABLE reckon_effects ADD CONSTRAINT reckon_effects_insert_inputs_pending
    CHECK (insert_inputs IS NULL OR state = 'PENDING') NOT VALID;

-- Refuses what the insert trigger refused, and moves the inputs to insert_inputs (detail only
-- when there is one, so that a JSON null stays a JSON null).
CREATE OR REPLACE FUNCTION reckon_effect_insert_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM 'PENDING' THEN
        RAISE EXCEPTION 'reckon: illegal effect transition (new) -> % (effect %): effects are created PENDING', NEW.state, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
    END IF;
    IF coalesce(NEW.transition_actor, '') = '' OR coalesce(NEW.transition_reason, '') = '' THEN
        RAISE EXCEPTION 'reckon: effect transition (new) -> % (effect %) needs transition_actor and transition_reason',
            NEW.state, NEW.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'reckon_effect_transition';
    END IF;
    NEW.insert_inputs := jsonb_build_object('actor', NEW.transition_actor, 'reason', NEW.transition_reason)
        || CASE WHEN NEW.transition_detail IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('detail', NEW.transition_detail) END;
    NEW.updated_at := now();
    NEW.transition_actor := NULL;
    NEW.transition_reason := NULL;
    NEW.transition_detail := NULL;
    RETURN NEW;
END;
$$;

-- Records an insert that happened, from the row as stored.
CREATE OR REPLACE FUNCTION reckon_effect_insert_record() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, detail)
    VALUES (NEW.id, NEW.tenant_id, NULL, NEW.state, NEW.insert_inputs->>'actor', NEW.insert_inputs->>'reason',
            NEW.attempts, NEW.insert_inputs->'detail');
    RETURN NULL;
END;
$$;

-- reckon_effect_transition (0001) now guards state changes only (inserts: above), and clears the
-- insert's inputs at the first one. Otherwise as before: a state change must be allowed by
-- reckon_effect_transition_allowed and name an actor and a reason; it is recorded in
-- reckon_effect_transitions and the inputs are reset. Errors use SQLSTATE 23514 with constraint
-- reckon_effect_transition.
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

DROP TRIGGER IF EXISTS reckon_effect_insert ON reckon_effects;
DROP TRIGGER IF EXISTS reckon_effect_insert_check ON reckon_effects;
CREATE TRIGGER reckon_effect_insert_check
    BEFORE INSERT ON reckon_effects
    FOR EACH ROW EXECUTE FUNCTION reckon_effect_insert_check();
CREATE TRIGGER reckon_effect_insert
    AFTER INSERT ON reckon_effects
    FOR EACH ROW EXECUTE FUNCTION reckon_effect_insert_record();

-- The second scan: ghosts written by transactions the first scan could not see (all ended before
-- the lock above was granted), found by xid through reckon_effect_transitions_position_idx.
SELECT reckon_audit_mark_ghosts(current_setting('reckon.ghost_scan_since')::xid8);
DROP FUNCTION reckon_audit_mark_ghosts(xid8);
