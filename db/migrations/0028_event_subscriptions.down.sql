-- Back to 0016's reckon_audit_drop_partition, which knows neither events nor subscriptions.
CREATE OR REPLACE FUNCTION reckon_audit_drop_partition(name text, cutoff timestamptz, actor text, reason text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    p reckon_audit_partitions;
    held boolean := false;
    n bigint;
BEGIN
    SELECT * INTO p FROM reckon_audit_partitions WHERE partition = name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reckon: % is not a partition of the audit trail', name USING ERRCODE = 'undefined_table';
    END IF;
    IF p.range_to > cutoff THEN
        RAISE EXCEPTION 'reckon: partition % ends at %, after the cutoff %', name, p.range_to, cutoff
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(actor, '') = '' OR coalesce(reason, '') = '' THEN
        RAISE EXCEPTION 'reckon: dropping an audit partition needs an actor and a reason'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Every transition of an effect is at or after its creation, so only effects (sagas) created
    -- before the end of the range can have rows in it.
    IF p.parent = 'reckon_effect_transitions' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.created_at < $1
            AND EXISTS (SELECT 1 FROM %I t WHERE t.effect_id = e.id))', name) INTO held USING p.range_to;
    ELSIF p.parent = 'reckon_saga_transitions' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM reckon_sagas s WHERE s.created_at < $1
            AND EXISTS (SELECT 1 FROM %I t WHERE t.saga_id = s.id))', name) INTO held USING p.range_to;
    END IF;
    IF held THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT count(*) FROM %I', name) INTO n;
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', p.parent, name);
    EXECUTE format('DROP TABLE %I', name);
    DELETE FROM reckon_audit_partitions WHERE partition = name;
    INSERT INTO reckon_audit_drops (parent, partition, range_from, range_to, row_count, dropped_by, reason)
    VALUES (p.parent, name, p.range_from, p.range_to, n, actor, reason);
    RETURN n;
END;
$$;

DROP TABLE IF EXISTS reckon_event_subscriptions;
