DROP FUNCTION IF EXISTS reckon_effect_observe(uuid, text, text, jsonb);

-- The functions as 0030_limits_exact made them.
CREATE OR REPLACE FUNCTION reckon_limit_release(
    p_connector text, p_tenant text, p_effect uuid, p_per_tenant boolean,
    p_break_after integer, p_break_for_ms integer, p_failed boolean, p_retry_after_ms integer,
    p_max_in_flight integer, p_rate integer, p_claim_ms integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    lim      reckon_connector_limits%ROWTYPE;
    st       reckon_limit_state%ROWTYPE;
    key      text;
    t        timestamptz;
    freed    boolean;
    changed  boolean := false;
    n        integer;
    free     integer;
    heads    uuid[];
    jobs     bigint[];
    queue    text;
    notified text[] := '{}';
BEGIN
    DELETE FROM reckon_limit_slots WHERE effect_id = p_effect;
    freed := FOUND;
    SELECT * INTO lim FROM reckon_connector_limits WHERE connector = p_connector;
    IF FOUND THEN
        p_per_tenant := lim.per_tenant; p_break_after := lim.break_after; p_break_for_ms := lim.break_for_ms;
        p_max_in_flight := lim.max_in_flight; p_rate := lim.rate;
    END IF;
    key := CASE WHEN p_per_tenant THEN p_tenant ELSE '' END;
    IF freed AND p_max_in_flight > 0 THEN
        SELECT * INTO st FROM reckon_limit_state WHERE connector = p_connector AND tenant_id = key FOR UPDATE;
        t := clock_timestamp(); -- after the lock
        free := greatest(p_max_in_flight - (
            SELECT count(*) FROM reckon_limit_slots
            WHERE connector = p_connector AND tenant_id = key AND expires_at > t), 0);
        SELECT array_agg(w.effect_id ORDER BY w.queued_at, w.effect_id) INTO heads FROM (
            SELECT effect_id, queued_at FROM reckon_limit_waiters
            WHERE connector = p_connector AND tenant_id = key AND expect_by > t AND (due_at IS NULL OR due_at <= t)
            ORDER BY queued_at, effect_id
            LIMIT least(free, 100)) AS w;
        IF heads IS NOT NULL AND p_rate = 0 AND NOT coalesce(st.paused_until > t, false) AND st.opened_until IS NULL THEN
            INSERT INTO reckon_limit_slots (effect_id, connector, tenant_id, expires_at)
            SELECT h, p_connector, key, t + make_interval(secs => p_claim_ms / 1000.0) FROM unnest(heads) AS h
            ON CONFLICT (effect_id) DO UPDATE SET connector = EXCLUDED.connector, tenant_id = EXCLUDED.tenant_id,
                expires_at = EXCLUDED.expires_at;
            -- Out of the queue's count, but still waiting (for the event trigger and the check of
            -- an interrupted attempt) until the slot is claimed or lapses.
            UPDATE reckon_limit_waiters SET due_at = 'infinity', expect_by = t + make_interval(secs => p_claim_ms / 1000.0)
            WHERE effect_id = ANY (heads);
        END IF;
        -- The jobs of those effects, and of the next effects, as many as twice the cap (at most
        -- 64), that are snoozed are made due now (River fetches them on its insert notification,
        -- within its fetch cooldown): a handed place is claimed when its effect's job runs, and
        -- the next ones wait in place before their turn comes. Further back, a job fetched now
        -- would only ask and snooze again.
        SELECT array_agg(j.id) INTO jobs
        FROM reckon_effects e JOIN river_job j ON j.id = e.job_id AND j.state = 'available' AND j.scheduled_at > t
        WHERE e.id = ANY (heads);
        SELECT coalesce(jobs, '{}') || coalesce(array_agg(s.id), '{}') INTO jobs FROM (
            SELECT j.id FROM (
                SELECT e.job_id, w.queued_at, w.effect_id
                FROM reckon_limit_waiters w JOIN reckon_effects e ON e.id = w.effect_id
                WHERE w.connector = p_connector AND w.tenant_id = key AND w.expect_by > t
                  AND (w.due_at IS NULL OR w.due_at <= t)
                ORDER BY w.queued_at, w.effect_id
                LIMIT least(2 * p_max_in_flight, 64)) AS h
            JOIN river_job j ON j.id = h.job_id AND j.state = 'available' AND j.scheduled_at > t) AS s;
        IF heads IS NOT NULL THEN
            PERFORM pg_notify('reckon_limit_slots', array_to_string(heads, ','));
        END IF;
        FOR queue IN
            UPDATE river_job SET scheduled_at = t
            WHERE id = ANY (jobs) AND state = 'available' AND scheduled_at > t
            RETURNING river_job.queue
        LOOP
            IF NOT queue = ANY (notified) THEN
                notified := notified || queue;
                PERFORM pg_notify(current_schema() || '.river_insert', json_build_object('queue', queue)::text);
            END IF;
        END LOOP;
    END IF;
    IF p_failed IS NULL THEN
        UPDATE reckon_limit_state SET probe_effect = NULL, probe_until = NULL
        WHERE connector = p_connector AND tenant_id = key AND probe_effect = p_effect;
        RETURN;
    END IF;
    IF p_retry_after_ms > 0 THEN
        INSERT INTO reckon_limit_state AS s (connector, tenant_id, next_at, paused_until)
        VALUES (p_connector, key, 'epoch', clock_timestamp() + make_interval(secs => p_retry_after_ms / 1000.0))
        ON CONFLICT (connector, tenant_id) DO UPDATE SET paused_until = greatest(s.paused_until, EXCLUDED.paused_until);
        changed := true;
    END IF;
    IF NOT p_failed THEN
        UPDATE reckon_limit_state
        SET failures = 0, opened_until = NULL, probe_effect = NULL, probe_until = NULL
        WHERE connector = p_connector AND tenant_id = key AND (failures > 0 OR opened_until IS NOT NULL);
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed OR n > 0;
    ELSIF p_break_after > 0 THEN
        INSERT INTO reckon_limit_state AS s (connector, tenant_id, next_at, failures)
        VALUES (p_connector, key, 'epoch', 1)
        ON CONFLICT (connector, tenant_id) DO UPDATE SET failures = s.failures + 1;
        UPDATE reckon_limit_state
        SET opened_until = clock_timestamp() + make_interval(secs => p_break_for_ms / 1000.0),
            probe_effect = NULL, probe_until = NULL
        WHERE connector = p_connector AND tenant_id = key AND failures >= p_break_after;
        GET DIAGNOSTICS n = ROW_COUNT;
        changed := changed OR n > 0;
    END IF;
    IF changed THEN
        PERFORM pg_notify('reckon_limits', 'limits');
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION reckon_limit_claim(p_effect uuid, p_hold_ms integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE reckon_limit_slots SET expires_at = clock_timestamp() + make_interval(secs => p_hold_ms / 1000.0)
    WHERE effect_id = p_effect AND expires_at > clock_timestamp();
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM reckon_limit_waiters WHERE effect_id = p_effect;
    RETURN true;
END
$$;
