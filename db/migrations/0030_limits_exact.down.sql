-- Back to 0025's limits and 0027's dispatch event.
DROP FUNCTION reckon_limit_claim(uuid, integer);
DROP FUNCTION reckon_limit_wait_busy(uuid, text, text, timestamptz, integer);
DROP FUNCTION reckon_limit_release(text, text, uuid, boolean, integer, integer, boolean, integer, integer, integer, integer);

CREATE OR REPLACE FUNCTION reckon_limit_acquire(
    p_connector text, p_tenant text, p_effect uuid, p_queued_at timestamptz,
    p_rate integer, p_per_ms integer, p_burst integer, p_max_in_flight integer, p_per_tenant boolean,
    p_break_after integer, p_break_for_ms integer, p_hold_ms integer, p_grace_ms integer,
    OUT wait_ms integer, OUT reason text)
LANGUAGE plpgsql AS $$
DECLARE
    lim      reckon_connector_limits%ROWTYPE;
    st       reckon_limit_state%ROWTYPE;
    key      text;
    t        timestamptz;
    step     interval;           -- one turn of the rate
    early    interval;           -- how early a turn may be taken (the burst)
    turn     timestamptz;        -- the effect's reserved turn, if any
    fresh    boolean := false;   -- the grant takes a new turn (advances next_at)
    probe    boolean := false;
    busy     integer;
    ahead    integer;
    wait     double precision;
BEGIN
    SELECT * INTO lim FROM reckon_connector_limits WHERE connector = p_connector;
    IF FOUND THEN
        p_rate := lim.rate; p_per_ms := lim.per_ms; p_burst := lim.burst; p_max_in_flight := lim.max_in_flight;
        p_per_tenant := lim.per_tenant; p_break_after := lim.break_after; p_break_for_ms := lim.break_for_ms;
    END IF;
    key := CASE WHEN p_per_tenant THEN p_tenant ELSE '' END;
    SELECT * INTO st FROM reckon_limit_state WHERE connector = p_connector AND tenant_id = key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO reckon_limit_state (connector, tenant_id, next_at)
        VALUES (p_connector, key, 'epoch') ON CONFLICT DO NOTHING;
        SELECT * INTO st FROM reckon_limit_state WHERE connector = p_connector AND tenant_id = key FOR UPDATE;
    END IF;
    t := clock_timestamp(); -- after the lock
    SELECT w.due_at INTO turn FROM reckon_limit_waiters w WHERE w.effect_id = p_effect AND w.expect_by > t;

    IF st.paused_until > t THEN
        wait := extract(epoch FROM st.paused_until - t) * 1000; reason := 'paused';
    ELSIF st.opened_until IS NOT NULL AND st.opened_until > t THEN
        wait := extract(epoch FROM st.opened_until - t) * 1000; reason := 'open';
    ELSIF st.opened_until IS NOT NULL AND st.probe_effect IS DISTINCT FROM p_effect AND st.probe_until > t THEN
        wait := least(extract(epoch FROM st.probe_until - t) * 1000, 1000); reason := 'open';
    ELSE
        probe := st.opened_until IS NOT NULL; -- half open: this call is the probe
        IF p_rate > 0 AND turn IS NULL THEN
            step := make_interval(secs => p_per_ms / 1000.0 / p_rate);
            early := step * (p_burst - 1);
            IF greatest(st.next_at, t) - early <= t THEN
                fresh := true; -- a turn now
            ELSE
                -- Reserve the next turn; the effect comes back for it.
                turn := greatest(st.next_at, t) - early;
                UPDATE reckon_limit_state SET next_at = greatest(st.next_at, t) + step
                WHERE connector = p_connector AND tenant_id = key;
            END IF;
        END IF;
        IF turn > t THEN
            wait := extract(epoch FROM turn - t) * 1000; reason := 'rate';
        ELSE
            -- A turn of the rate, if any, is the effect's: now the cap, first come first served in
            -- enqueue order among the effects whose turn has come.
            IF p_max_in_flight > 0 THEN
                SELECT count(*) INTO busy FROM reckon_limit_slots
                WHERE connector = p_connector AND tenant_id = key AND expires_at > t AND effect_id <> p_effect;
                SELECT count(*) INTO ahead FROM (
                    SELECT 1 FROM reckon_limit_waiters
                    WHERE connector = p_connector AND tenant_id = key AND (queued_at, effect_id) < (p_queued_at, p_effect)
                      AND expect_by > t AND (due_at IS NULL OR due_at <= t)
                    LIMIT 1000) AS q;
                IF probe THEN ahead := 0; END IF;
                IF busy + ahead >= p_max_in_flight THEN
                    -- Calls end when they end: ask again soon, later when far back.
                    wait := 50 * (1 + ahead / p_max_in_flight) * (0.75 + random() / 2); reason := 'in_flight';
                END IF;
            END IF;
            IF reason IS NULL THEN
                IF fresh THEN
                    UPDATE reckon_limit_state SET next_at = greatest(st.next_at, t) + step
                    WHERE connector = p_connector AND tenant_id = key;
                END IF;
                IF p_max_in_flight > 0 OR probe THEN
                    INSERT INTO reckon_limit_slots (effect_id, connector, tenant_id, expires_at)
                    VALUES (p_effect, p_connector, key, t + make_interval(secs => p_hold_ms / 1000.0))
                    ON CONFLICT (effect_id) DO UPDATE SET connector = EXCLUDED.connector, tenant_id = EXCLUDED.tenant_id,
                        expires_at = EXCLUDED.expires_at;
                END IF;
                IF probe THEN
                    UPDATE reckon_limit_state SET probe_effect = p_effect, probe_until = t + make_interval(secs => p_hold_ms / 1000.0)
                    WHERE connector = p_connector AND tenant_id = key;
                END IF;
                DELETE FROM reckon_limit_waiters WHERE effect_id = p_effect;
                wait_ms := 0; reason := CASE WHEN probe THEN 'probe' ELSE 'granted' END;
                RETURN;
            END IF;
            IF fresh THEN -- the cap holds it back: it keeps a turn of the rate, now
                turn := t;
                UPDATE reckon_limit_state SET next_at = greatest(st.next_at, t) + step
                WHERE connector = p_connector AND tenant_id = key;
            END IF;
        END IF;
    END IF;

    -- Far back, ask again within 10 to 15 s (a changed limit is seen then), spread so that the
    -- waiters held back together do not all come back at once.
    wait_ms := least(greatest(ceil(wait), 1), 10000 + random() * 5000)::integer;
    IF reason IN ('paused', 'open') THEN
        turn := NULL; -- a turn reserved before the pause or the circuit's opening is given up
    END IF;
    -- River runs a job snoozed for more than 5 s only once its scheduler (every 5 s) has made it
    -- available again: such a waiter is given that much longer to come back.
    INSERT INTO reckon_limit_waiters (effect_id, connector, tenant_id, queued_at, due_at, expect_by)
    VALUES (p_effect, p_connector, key, p_queued_at, turn,
            t + make_interval(secs => (wait_ms + p_grace_ms + CASE WHEN wait_ms > 5000 THEN 5000 ELSE 0 END) / 1000.0))
    ON CONFLICT (effect_id) DO UPDATE SET connector = EXCLUDED.connector, tenant_id = EXCLUDED.tenant_id,
        queued_at = EXCLUDED.queued_at, due_at = EXCLUDED.due_at, expect_by = EXCLUDED.expect_by;
END
$$;

CREATE OR REPLACE FUNCTION reckon_limit_release(
    p_connector text, p_tenant text, p_effect uuid, p_per_tenant boolean,
    p_break_after integer, p_break_for_ms integer, p_failed boolean, p_retry_after_ms integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    lim     reckon_connector_limits%ROWTYPE;
    key     text;
    changed boolean := false;
    n       integer;
BEGIN
    DELETE FROM reckon_limit_slots WHERE effect_id = p_effect;
    SELECT * INTO lim FROM reckon_connector_limits WHERE connector = p_connector;
    IF FOUND THEN
        p_per_tenant := lim.per_tenant; p_break_after := lim.break_after; p_break_for_ms := lim.break_for_ms;
    END IF;
    key := CASE WHEN p_per_tenant THEN p_tenant ELSE '' END;
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

CREATE OR REPLACE FUNCTION reckon_dispatch_event() RETURNS trigger
LANGUAGE plpgsql
-- One statement per job: the effects it carries are looked up by primary key, never by a scan of
-- reckon_effects (the plan is cached for the session, and may have been made on a near-empty table).
SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO reckon_events (type, tenant_id, session_key, turn_id, effect_id, run_id, payload)
    SELECT 'effect.dispatched', e.tenant_id,
        CASE WHEN e.turn_id IS NOT NULL THEN (SELECT t.session_key FROM reckon_turns t WHERE t.id = e.turn_id) END,
        e.turn_id, e.id, e.run_id,
        jsonb_build_object('connector', e.connector, 'attempt', e.attempts + 1,
            'job_id', NEW.id, 'reactor', NEW.attempted_by[cardinality(NEW.attempted_by)])
    FROM reckon_effects e
    WHERE e.id = ANY (CASE WHEN NEW.args ? 'effect_id' THEN ARRAY[(NEW.args->>'effect_id')::uuid]
                           ELSE ARRAY(SELECT jsonb_array_elements_text(NEW.args->'effect_ids')::uuid) END)
      AND e.state = 'PENDING' AND e.job_id = NEW.id;
    RETURN NULL;
END;
$$;

ALTER TABLE reckon_limit_state DROP COLUMN started_next_at;
