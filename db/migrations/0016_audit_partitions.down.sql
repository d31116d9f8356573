-- Back to unpartitioned histories: every row is copied into a plain table of the old shape.
DROP TABLE reckon_retention_runs;
DROP TABLE reckon_effect_tombstones;
DROP TABLE reckon_retention_policies;

-- The audit views as 0006 made them.
DROP VIEW reckon_audit_stuck;
DROP VIEW reckon_audit_effects;
DROP VIEW reckon_audit_transitions;

DO $$
DECLARE
    parent text;
    next_id bigint;
BEGIN
    FOREACH parent IN ARRAY ARRAY['reckon_effect_transitions', 'reckon_saga_transitions', 'reckon_definition_changes'] LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', parent, parent || '_partitioned');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING CONSTRAINTS)', parent, parent || '_partitioned');
        EXECUTE format('INSERT INTO %I SELECT * FROM %I ORDER BY id', parent, parent || '_partitioned');
        EXECUTE format('SELECT coalesce(max(id), 0) + 1 FROM %I', parent) INTO next_id;
        EXECUTE format('DROP TABLE %I', parent || '_partitioned');
        EXECUTE format('ALTER TABLE %I ALTER COLUMN at SET DEFAULT now()', parent);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)', parent, next_id);
        EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (id)', parent);
    END LOOP;
END;
$$;

DROP FUNCTION reckon_audit_drop_partition(text, timestamptz, text, text);
DROP FUNCTION reckon_audit_ensure_partitions(text, timestamptz);
DROP FUNCTION reckon_audit_add_partition(text, timestamptz, timestamptz);
DROP TABLE reckon_audit_drops;
DROP FUNCTION reckon_audit_append_only();
DROP TABLE reckon_audit_partitions;
DROP TABLE reckon_audit_settings;

CREATE INDEX reckon_effect_transitions_effect_idx ON reckon_effect_transitions (effect_id, id);
CREATE INDEX reckon_effect_transitions_tenant_at_idx ON reckon_effect_transitions (tenant_id, at);
CREATE INDEX reckon_saga_transitions_saga_idx ON reckon_saga_transitions (saga_id, id);
CREATE INDEX reckon_definition_changes_name_idx ON reckon_definition_changes (kind, name, id);

-- A saga transition of a saga that no longer exists has no place in the old schema.
DELETE FROM reckon_saga_transitions t WHERE NOT EXISTS (SELECT 1 FROM reckon_sagas s WHERE s.id = t.saga_id);
ALTER TABLE reckon_saga_transitions
    ADD CONSTRAINT reckon_saga_transitions_saga_id_fkey FOREIGN KEY (saga_id) REFERENCES reckon_sagas (id) ON DELETE CASCADE;

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

CREATE FUNCTION reckon_definition_changes_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reckon: reckon_definition_changes is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER reckon_definition_changes_append_only
    BEFORE UPDATE OR DELETE ON reckon_definition_changes
    FOR EACH ROW EXECUTE FUNCTION reckon_definition_changes_append_only();

CREATE TRIGGER reckon_definition_changes_no_truncate
    BEFORE TRUNCATE ON reckon_definition_changes
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_definition_changes_append_only();

-- reckon_audit_transitions: every transition, with what it was a transition of.
CREATE VIEW reckon_audit_transitions AS
SELECT t.id, t.effect_id, t.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key,
       e.run_id, t.from_state, t.to_state, t.actor, t.reason, t.attempt, t.at, t.detail,
       (t.from_state IS NOT DISTINCT FROM t.to_state) AS observation
FROM reckon_effect_transitions t
JOIN reckon_effects e ON e.id = t.effect_id;

-- reckon_audit_effects: one row per effect, with when it was settled and its latest transition.
CREATE VIEW reckon_audit_effects AS
SELECT e.id, e.tenant_id, e.connector, e.policy, e.tags, e.state, e.idempotency_key, e.business_key,
       e.args, e.result, e.error, e.attempts, e.max_attempts, e.run_id, e.turn_id, e.turn_group,
       e.compensates_id, e.created_at, e.updated_at,
       CASE WHEN e.state IN ('CONFIRMED', 'FAILED') THEN e.updated_at END AS settled_at,
       last.actor AS last_actor, last.reason AS last_reason, last.at AS last_at,
       (SELECT count(*) FROM reckon_effects c WHERE c.compensates_id = e.id) AS compensations
FROM reckon_effects e
LEFT JOIN LATERAL (
    SELECT t.actor, t.reason, t.at
    FROM reckon_effect_transitions t
    WHERE t.effect_id = e.id AND t.from_state IS DISTINCT FROM t.to_state
    ORDER BY t.id DESC
    LIMIT 1
) last ON true;

-- reckon_audit_stuck: the effects waiting for an operator, with why and since when they are STUCK.
CREATE VIEW reckon_audit_stuck AS
SELECT e.id, e.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key, e.args,
       e.error, e.attempts, e.run_id, e.created_at,
       s.at AS stuck_since, s.actor AS stuck_by, s.reason AS stuck_reason, s.detail AS stuck_detail,
       now() - s.at AS stuck_for
FROM reckon_effects e
LEFT JOIN LATERAL (
    SELECT t.at, t.actor, t.reason, t.detail
    FROM reckon_effect_transitions t
    WHERE t.effect_id = e.id AND t.to_state = 'STUCK' AND t.from_state IS DISTINCT FROM t.to_state
    ORDER BY t.id DESC
    LIMIT 1
) s ON true
WHERE e.state = 'STUCK';
