-- An operator's pause of a connector (docs/design.md "Limits", "Operator pauses"): no new call of
-- the connector starts — globally (tenant_id '') or for one tenant's effects — until an operator
-- resumes it. It is durable (it never expires, unlike an upstream's Retry-After) and is kept apart
-- from reckon_limit_state, so that `limit reset` (which ends Retry-After pauses and closes
-- circuits) never ends it. Each pause and resume is a row of reckon_connector_pause_log, kept
-- after the pause is gone.
CREATE TABLE reckon_connector_pauses (
    connector text NOT NULL,
    tenant_id text NOT NULL DEFAULT '', -- '': every tenant
    paused_by text NOT NULL,
    reason    text NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (connector, tenant_id)
);

CREATE TABLE reckon_connector_pause_log (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    connector text NOT NULL,
    tenant_id text NOT NULL,
    action    text NOT NULL CHECK (action IN ('pause', 'resume')),
    actor     text NOT NULL,
    reason    text NOT NULL,
    at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reckon_connector_pause_log_connector_idx ON reckon_connector_pause_log (connector, at DESC);

-- reckon_limit_acquire, after an operator's pause: an effect of a paused connector (a pause of
-- every tenant, or of its own) is refused with reason 'operator' and waits in the queue of its
-- limit key, out of the count of the effects ahead (due_at 'infinity', as a place handed on is):
-- a tenant's pause holds no other tenant's effects back under a shared cap. Its reserved turn of
-- the rate is given up, as under a Retry-After. The row is what a reactor killed while the effect
-- waited finds (reckon_limit_waiters: nothing was called). It asks again in about 5 s; a resume
-- makes the waiting effects' jobs due at once (reckon_connector_resume below). Otherwise it is
-- reckon_limit_acquire, unchanged.
CREATE FUNCTION reckon_limit_acquire_unpaused(
    p_connector text, p_tenant text, p_effect uuid, p_queued_at timestamptz,
    p_rate integer, p_per_ms integer, p_burst integer, p_max_in_flight integer, p_per_tenant boolean,
    p_break_after integer, p_break_for_ms integer, p_hold_ms integer, p_grace_ms integer,
    OUT wait_ms integer, OUT reason text)
LANGUAGE plpgsql AS $$
DECLARE
    per_tenant boolean := p_per_tenant;
    key        text;
BEGIN
    IF EXISTS (SELECT 1 FROM reckon_connector_pauses
               WHERE connector = p_connector AND tenant_id IN ('', p_tenant)) THEN
        SELECT l.per_tenant INTO per_tenant FROM reckon_connector_limits l WHERE l.connector = p_connector;
        IF NOT FOUND THEN
            per_tenant := p_per_tenant;
        END IF;
        key := CASE WHEN per_tenant THEN p_tenant ELSE '' END;
        wait_ms := (4000 + random() * 2000)::integer;
        reason := 'operator';
        INSERT INTO reckon_limit_waiters (effect_id, connector, tenant_id, queued_at, due_at, expect_by)
        VALUES (p_effect, p_connector, key, p_queued_at, 'infinity',
                clock_timestamp() + make_interval(secs => (wait_ms + p_grace_ms) / 1000.0))
        ON CONFLICT (effect_id) DO UPDATE SET connector = EXCLUDED.connector, tenant_id = EXCLUDED.tenant_id,
            queued_at = EXCLUDED.queued_at, due_at = EXCLUDED.due_at, expect_by = EXCLUDED.expect_by;
        RETURN;
    END IF;
    SELECT a.wait_ms, a.reason INTO wait_ms, reason
    FROM reckon_limit_acquire(p_connector, p_tenant, p_effect, p_queued_at, p_rate, p_per_ms, p_burst,
        p_max_in_flight, p_per_tenant, p_break_after, p_break_for_ms, p_hold_ms, p_grace_ms) AS a;
END
$$;

-- reckon_connector_pause pauses p_connector (for p_tenant's effects, or '' for every tenant's) by
-- p_actor for p_reason, logged and notified on reckon_limits (the reactors read their view of the
-- limits again). A key already paused keeps its pause as it was (created false): who paused it
-- first, why and since when.
CREATE FUNCTION reckon_connector_pause(p_connector text, p_tenant text, p_actor text, p_reason text,
    OUT paused_by text, OUT reason text, OUT paused_at timestamptz, OUT created boolean)
LANGUAGE plpgsql AS $$
BEGIN
    LOOP
        INSERT INTO reckon_connector_pauses AS p (connector, tenant_id, paused_by, reason)
        VALUES (p_connector, p_tenant, p_actor, p_reason)
        ON CONFLICT ON CONSTRAINT reckon_connector_pauses_pkey DO NOTHING
        RETURNING p.paused_by, p.reason, p.paused_at INTO paused_by, reason, paused_at;
        created := FOUND;
        IF created THEN
            INSERT INTO reckon_connector_pause_log (connector, tenant_id, action, actor, reason)
            VALUES (p_connector, p_tenant, 'pause', p_actor, p_reason);
            PERFORM pg_notify('reckon_limits', 'limits');
            RETURN;
        END IF;
        SELECT p.paused_by, p.reason, p.paused_at INTO paused_by, reason, paused_at
        FROM reckon_connector_pauses p WHERE p.connector = p_connector AND p.tenant_id = p_tenant;
        IF FOUND THEN
            RETURN;
        END IF;
        -- Resumed between the two statements: pause it anew.
    END LOOP;
END
$$;

-- reckon_connector_resume ends the pause of p_connector for p_tenant ('' : the pause of every
-- tenant) by p_actor for p_reason, logged and notified on reckon_limits, and makes the snoozed
-- River jobs of the connector's waiting effects (of p_tenant, or of every tenant) due now, with
-- River's insert notification for their queues: they are fetched within River's fetch cooldown.
-- It returns whether there was such a pause.
CREATE FUNCTION reckon_connector_resume(p_connector text, p_tenant text, p_actor text, p_reason text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    DELETE FROM reckon_connector_pauses WHERE connector = p_connector AND tenant_id = p_tenant;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO reckon_connector_pause_log (connector, tenant_id, action, actor, reason)
    VALUES (p_connector, p_tenant, 'resume', p_actor, p_reason);
    PERFORM pg_notify('reckon_limits', 'limits');
    FOR q IN
        WITH due AS (
            UPDATE river_job j SET scheduled_at = now()
            FROM reckon_limit_waiters w JOIN reckon_effects e ON e.id = w.effect_id
            WHERE w.connector = p_connector AND (p_tenant = '' OR e.tenant_id = p_tenant)
              AND j.id = e.job_id AND j.state = 'available' AND j.scheduled_at > now()
            RETURNING j.queue)
        SELECT DISTINCT due.queue FROM due
    LOOP
        PERFORM pg_notify(current_schema() || '.river_insert', json_build_object('queue', q)::text);
    END LOOP;
    RETURN true;
END
$$;
