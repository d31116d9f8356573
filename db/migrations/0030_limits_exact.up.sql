-- Limits that keep their promise (docs/design.md, "Limits"):
--
-- * The rate is a token bucket of the calls that start. reckon_limit_state.started_next_at is its
--   theoretical time of the next start (GCRA over grants): a call may start at t only when
--   started_next_at - (burst - 1) turns <= t, and each start moves it one turn on. next_at stays
--   the schedule of reservations, which gives held-back effects their order and their turn; a
--   turn that comes late no longer lets its effect start beside the calls of later turns, so in
--   any window of length w at most burst + rate × w calls start.
-- * A call that ends hands its place to the effect waiting at the head of the cap's queue at
--   once: reckon_limit_release (under the key's row lock, so that concurrent releases hand free
--   places to distinct waiters) gives it a slot to claim within p_claim_ms (its waiter row, due
--   'infinity', stays until then, out of the queue's count) and notifies reckon_limit_slots with
--   its id; its reactor claims the slot (extends it to the call's hold) and calls. With a rate
--   too, the head is only woken to ask again. A slot handed to a reactor that died lapses after
--   the claim window.
-- * An effect held back by the limits announces its dispatch once: later claims of its job while
--   it waits (a reckon_limit_waiters row) write no effect.dispatched event.
--
-- Online: one table is locked (reckon_limit_state, by ADD COLUMN with a constant default, which
-- does not rewrite it); the functions are replaced in place with the signatures the previous
-- binaries call.

ALTER TABLE reckon_limit_state ADD COLUMN started_next_at timestamptz NOT NULL DEFAULT 'epoch';

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
    fresh    boolean := false;   -- the effect takes the next turn of the schedule now
    probe    boolean := false;
    busy     integer;
    free     integer;
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
    SELECT w.due_at INTO turn FROM reckon_limit_waiters w
    WHERE w.effect_id = p_effect AND w.expect_by > t AND w.due_at IS DISTINCT FROM 'infinity'; -- not a handed place

    IF st.paused_until > t THEN
        wait := extract(epoch FROM st.paused_until - t) * 1000; reason := 'paused';
    ELSIF st.opened_until IS NOT NULL AND st.opened_until > t THEN
        wait := extract(epoch FROM st.opened_until - t) * 1000; reason := 'open';
    ELSIF st.opened_until IS NOT NULL AND st.probe_effect IS DISTINCT FROM p_effect AND st.probe_until > t THEN
        wait := least(extract(epoch FROM st.probe_until - t) * 1000, 1000); reason := 'open';
    ELSE
        probe := st.opened_until IS NOT NULL; -- half open: this call is the probe
        IF p_rate = 0 AND NOT probe AND p_max_in_flight > 0 THEN
            -- A place a release handed to it (or its own, still live): it is the effect's.
            UPDATE reckon_limit_slots SET expires_at = t + make_interval(secs => p_hold_ms / 1000.0)
            WHERE effect_id = p_effect AND connector = p_connector AND tenant_id = key AND expires_at > t;
            IF FOUND THEN
                DELETE FROM reckon_limit_waiters WHERE effect_id = p_effect;
                wait_ms := 0; reason := 'granted';
                RETURN;
            END IF;
        END IF;
        IF p_rate > 0 THEN
            step := make_interval(secs => p_per_ms / 1000.0 / p_rate);
            early := step * (p_burst - 1);
            IF turn IS NULL THEN
                IF greatest(st.next_at, t) - early <= t THEN
                    fresh := true; -- the schedule has a turn now
                ELSE
                    -- Reserve the next turn; the effect comes back for it.
                    turn := greatest(st.next_at, t) - early;
                    UPDATE reckon_limit_state SET next_at = greatest(st.next_at, t) + step
                    WHERE connector = p_connector AND tenant_id = key;
                END IF;
            END IF;
            IF turn > t THEN
                wait := extract(epoch FROM turn - t) * 1000; reason := 'rate';
            ELSIF st.started_next_at - early > t THEN
                -- Its turn has come, but the bucket of calls started is empty: turns that came
                -- late have been taken meanwhile. It waits for the bucket, keeping its place.
                wait := extract(epoch FROM st.started_next_at - early - t) * 1000; reason := 'rate';
            END IF;
        END IF;
        IF reason IS NULL AND p_max_in_flight > 0 THEN
            -- The cap, first come first served in enqueue order among the effects whose turn has come.
            SELECT count(*) INTO busy FROM reckon_limit_slots
            WHERE connector = p_connector AND tenant_id = key AND expires_at > t AND effect_id <> p_effect;
            -- The effects ahead in the queue are counted only as far as matters: the places free,
            -- and as many again (a decision costs the same however many wait).
            free := greatest(p_max_in_flight - busy, 0);
            SELECT count(*) INTO ahead FROM (
                SELECT 1 FROM reckon_limit_waiters
                WHERE connector = p_connector AND tenant_id = key AND (queued_at, effect_id) < (p_queued_at, p_effect)
                  AND expect_by > t AND (due_at IS NULL OR due_at <= t)
                LIMIT least(free + p_max_in_flight, 1000)) AS q;
            IF probe THEN ahead := 0; END IF;
            IF ahead >= free THEN
                -- A call that ends hands its place to the head of the queue (or, with a rate,
                -- wakes it) and has the next effects' jobs fetched (reckon_limit_release); this is
                -- when to ask again without that (a place freed by a slot's lapse): within about a
                -- second near the head (with a rate, a quarter of it), after about 5 s further back.
                wait := CASE WHEN ahead < free + p_max_in_flight
                             THEN CASE WHEN p_rate > 0 THEN 250 ELSE 1000 END * (1 + ahead / p_max_in_flight)
                             ELSE 5000 END
                    * (0.75 + random() / 2);
                reason := 'in_flight';
            END IF;
        END IF;
        IF reason IS NULL THEN
            IF fresh THEN
                UPDATE reckon_limit_state SET next_at = greatest(st.next_at, t) + step
                WHERE connector = p_connector AND tenant_id = key;
            END IF;
            IF p_rate > 0 THEN
                UPDATE reckon_limit_state SET started_next_at = greatest(st.started_next_at, t) + step
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
        IF fresh THEN -- held back by the bucket or the cap: it keeps the schedule's turn, now
            turn := t;
            UPDATE reckon_limit_state SET next_at = greatest(st.next_at, t) + step
            WHERE connector = p_connector AND tenant_id = key;
        END IF;
    END IF;

    -- Far back, ask again within 10 to 15 s (a changed limit is seen then), spread so that the
    -- waiters held back together do not all come back at once.
    wait_ms := least(greatest(ceil(wait), 1), 10000 + random() * 5000)::integer;
    IF reason IN ('paused', 'open') THEN
        turn := NULL; -- a turn reserved before the pause or the circuit's opening is given up
    END IF;
    INSERT INTO reckon_limit_waiters (effect_id, connector, tenant_id, queued_at, due_at, expect_by)
    VALUES (p_effect, p_connector, key, p_queued_at, turn, t + make_interval(secs => (wait_ms + p_grace_ms) / 1000.0))
    ON CONFLICT (effect_id) DO UPDATE SET connector = EXCLUDED.connector, tenant_id = EXCLUDED.tenant_id,
        queued_at = EXCLUDED.queued_at, due_at = EXCLUDED.due_at, expect_by = EXCLUDED.expect_by;
END
$$;

-- reckon_limit_release, as 0025's, and: a call that held a place of a cap (p_max_in_flight, or an
-- operator's) hands the places free to the effects at the head of the cap's queue, in enqueue
-- order — each gets a slot that lapses unless claimed within p_claim_ms, and leaves the queue —
-- and notifies reckon_limit_slots with their ids. With a rate (p_rate, or an operator's), while
-- the key is paused or its circuit not closed, the head is only woken (notified) to ask again, for
-- the rate's bucket and the circuit decide there. It also makes the River jobs of those effects and
-- of the next ones nearest the head that are snoozed due now (as River's JobRetry would), with
-- River's insert notification for their queue. Serialized with reckon_limit_acquire by the key's
-- row lock, so that concurrent releases never hand one place twice.
CREATE FUNCTION reckon_limit_release(
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

-- reckon_limit_claim claims the place of a cap that reckon_limit_release handed to effect p_effect:
-- its slot, unless it has lapsed, is held for the call (p_hold_ms), and the effect leaves the queue.
-- It returns false when there is no such place (lapsed, or the effect was only woken to ask again).
CREATE FUNCTION reckon_limit_claim(p_effect uuid, p_hold_ms integer) RETURNS boolean
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

-- reckon_limit_wait_busy puts effect p_effect in the queue of the limit key of p_connector and
-- p_key (the tenant for a per-tenant limit, else '') without deciding anything, for p_expect_ms:
-- its reactor could not ask in time. It waits there as a refused effect does (announced once; a
-- freed place may be handed to it); a reservation it holds is kept.
CREATE FUNCTION reckon_limit_wait_busy(p_effect uuid, p_connector text, p_key text, p_queued_at timestamptz,
    p_expect_ms integer) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO reckon_limit_waiters (effect_id, connector, tenant_id, queued_at, due_at, expect_by)
    VALUES (p_effect, p_connector, p_key, p_queued_at, NULL, clock_timestamp() + make_interval(secs => p_expect_ms / 1000.0))
    ON CONFLICT (effect_id) DO UPDATE SET expect_by = greatest(reckon_limit_waiters.expect_by, EXCLUDED.expect_by);
$$;

-- The previous binaries' release: no cap known but an operator's.
CREATE OR REPLACE FUNCTION reckon_limit_release(
    p_connector text, p_tenant text, p_effect uuid, p_per_tenant boolean,
    p_break_after integer, p_break_for_ms integer, p_failed boolean, p_retry_after_ms integer)
RETURNS void
LANGUAGE sql AS $$
    SELECT reckon_limit_release(p_connector, p_tenant, p_effect, p_per_tenant, p_break_after, p_break_for_ms,
        p_failed, p_retry_after_ms, 0, 0, 10000);
$$;

-- effect.dispatched once per attempt of an effect held back by the limits: a claim of its job
-- while it waits (its reckon_limit_waiters row exists) is no new attempt.
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
      AND e.state = 'PENDING' AND e.job_id = NEW.id
      AND NOT EXISTS (SELECT 1 FROM reckon_limit_waiters w WHERE w.effect_id = e.id);
    RETURN NULL;
END;
$$;
