-- The event stream (docs/events.md): one durable, ordered log of what happens to turns, supersede
-- decisions, commits, effects, sagas and runs, written in the same transaction as the change it
-- reports, so an event exists if and only if its change committed. It is the view reckon_event_log
-- over two tables:
--   * reckon_effect_transitions: each effect's insert and transition is an event already. The
--     history only gains the id of the transaction that wrote each row (xid): no second row.
--   * reckon_events: every other event, written by triggers (turns, decisions, messages, sagas,
--     runs, dispatches, confirmations, retries).
-- Both take their seq from one sequence, so (xid, seq) is unique across them.
--
-- Order. An event's position is (xid, seq): the id of the transaction that wrote it, then a
-- sequence within the log. Readers read only the events of transactions below the oldest one still
-- running (xid < pg_snapshot_xmin(pg_current_snapshot())): every transaction there has ended, so no
-- event can later appear behind a position a reader has passed. A transaction that commits late
-- holds readers back instead of landing behind them.
--
-- Like the audit histories (0016), the log is range-partitioned on at and kept by the same
-- functions; retention drops whole partitions once they are older than the events retention.

-- Locks, taken first and all at once (docs/operations.md, "Upgrades"), because this migration runs
-- while the previous version's servers and reactors write, in the order that code takes them where
-- it takes two in one transaction: a supersede decision is inserted before its turn is updated, a
-- turn before the effects its commit records; an enqueue locks its run before it inserts the run's
-- effects; settling an effect updates it, then its transition is written (trigger), then a saga's
-- transition (settle hook). So: reckon_turn_decisions, reckon_turns, reckon_messages, reckon_runs,
-- reckon_effects, reckon_effect_transitions (ACCESS EXCLUSIVE: ADD COLUMN), reckon_saga_transitions,
-- then reckon_audit_partitions, which only retention writes. The trigger on river_job is not here
-- but in 0032, a transaction of its own: the running code takes river_job and reckon_effects in
-- both orders (an enqueue inserts the dispatch job, then stamps the effect; a group commit settles
-- effects, then completes their jobs), so no order of the two in one transaction is safe.
-- The whole list is taken within half of deadlock_timeout (at most 500 ms), or the migration fails
-- with lock_not_available (55P03) and the migrator runs it again after a pause. A writer that
-- waits for one of these locks therefore never waits long enough for Postgres's deadlock check to
-- pick it as the victim: if it and the migration wait for each other (an order the code takes
-- that this list does not follow), the migration gives up first; once the list is held, the migration waits for no other hot table. Nothing here changes
-- the schema.
DO $$
DECLARE
    saved text := current_setting('lock_timeout');
    deadline timestamptz := clock_timestamp()
        + least(interval '500 milliseconds', current_setting('deadlock_timeout')::interval / 2);
    target record;
BEGIN
    FOR target IN
        SELECT l.tab, l.mode FROM (VALUES
            (1, 'reckon_turn_decisions', 'SHARE ROW EXCLUSIVE'),
            (2, 'reckon_turns', 'SHARE ROW EXCLUSIVE'),
            (3, 'reckon_messages', 'SHARE ROW EXCLUSIVE'),
            (4, 'reckon_runs', 'SHARE ROW EXCLUSIVE'),
            (5, 'reckon_effects', 'SHARE ROW EXCLUSIVE'),
            (6, 'reckon_effect_transitions', 'ACCESS EXCLUSIVE'),
            (7, 'reckon_saga_transitions', 'SHARE ROW EXCLUSIVE'),
            (8, 'reckon_audit_partitions', 'ACCESS EXCLUSIVE')
        ) AS l(n, tab, mode) ORDER BY l.n
    LOOP
        PERFORM set_config('lock_timeout',
            greatest(1, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000))::bigint::text, true);
        EXECUTE format('LOCK TABLE %I IN %s MODE', target.tab, target.mode);
    END LOOP;
    PERFORM set_config('lock_timeout', saved, true);
END;
$$;

ALTER TABLE reckon_audit_partitions DROP CONSTRAINT reckon_audit_partitions_parent_check;
ALTER TABLE reckon_audit_partitions ADD CONSTRAINT reckon_audit_partitions_parent_check
    CHECK (parent IN ('reckon_effect_transitions', 'reckon_saga_transitions', 'reckon_definition_changes', 'reckon_events'));

-- Effect transitions: the transaction id of each new row. Rows from before this migration have
-- none and are not part of the stream. Adding a nullable column rewrites nothing; the index is
-- partial for the same reason.
ALTER TABLE reckon_effect_transitions ADD COLUMN xid xid8;
ALTER TABLE reckon_effect_transitions ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX reckon_effect_transitions_position_idx ON reckon_effect_transitions (xid, id) WHERE xid IS NOT NULL;

CREATE TABLE reckon_events (
    xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq         bigint NOT NULL DEFAULT nextval('reckon_effect_transitions_id_seq'),
    -- {category}.{name}, e.g. turn.completed, tool.executed, effect.stuck (docs/events.md).
    type        text NOT NULL CHECK (type ~ '^[a-z][a-z_]*\.[a-z][a-z_]*$'),
    tenant_id   text NOT NULL,
    session_key text,
    turn_id     uuid,
    effect_id   uuid,
    saga_id     uuid,
    run_id      text,
    payload     jsonb NOT NULL DEFAULT '{}',
    at          timestamptz NOT NULL DEFAULT now()
) PARTITION BY RANGE (at);

CREATE INDEX reckon_events_position_idx ON reckon_events (xid, seq);

CREATE TABLE reckon_events_default PARTITION OF reckon_events DEFAULT;

CREATE TRIGGER reckon_events_append_only
    BEFORE UPDATE OR DELETE ON reckon_events
    FOR EACH ROW EXECUTE FUNCTION reckon_audit_append_only();
CREATE TRIGGER reckon_events_no_truncate
    BEFORE TRUNCATE ON reckon_events
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only();
CREATE TRIGGER reckon_events_default_no_truncate
    BEFORE TRUNCATE ON reckon_events_default
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only();

DO $$
BEGIN
    PERFORM reckon_audit_add_partition('reckon_events', date_trunc('month', now(), 'UTC'),
        date_trunc('month', now(), 'UTC') + interval '1 month');
    PERFORM reckon_audit_ensure_partitions('reckon_events');
END;
$$;

-- The last position retention has dropped (reckon_audit_drop_partition, 0028): a reader whose position
-- is before it has missed events and is told so instead of skipping them silently.
CREATE TABLE reckon_events_dropped (
    id  smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    xid xid8 NOT NULL,
    seq bigint NOT NULL,
    at  timestamptz NOT NULL DEFAULT now()
);

-- reckon_emit writes one event. The triggers below call it; so may the engine's own code for
-- events that no table change carries (artifact reuse).
--
-- Wake-ups: reckon_emit notifies reckon_events; an effect that settles already notifies
-- reckon_effect_settled (0002). Nothing else does: a transaction that notifies holds the
-- notification queue's lock, cluster-wide, through its commit, which serialized the commits of
-- one-effect enqueues (measured: half their throughput). Subscribers poll besides; the log is the
-- truth, a notification only wakes.
CREATE FUNCTION reckon_emit(p_type text, p_tenant text, p_session_key text, p_turn_id uuid,
    p_effect_id uuid, p_saga_id uuid, p_run_id text, p_payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- plpgsql, not sql: its INSERT is planned once per session, not at every call.
    INSERT INTO reckon_events (type, tenant_id, session_key, turn_id, effect_id, saga_id, run_id, payload)
    VALUES (p_type, p_tenant, p_session_key, p_turn_id, p_effect_id, p_saga_id, p_run_id, jsonb_strip_nulls(p_payload));
    PERFORM pg_notify('reckon_events', '');
END;
$$;

-- Effects recorded by Do carry the lease of their call: they are dispatched at once.
CREATE FUNCTION reckon_effect_leased_insert_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reckon_emit('effect.dispatched', NEW.tenant_id,
        CASE WHEN NEW.turn_id IS NOT NULL THEN (SELECT t.session_key FROM reckon_turns t WHERE t.id = NEW.turn_id) END,
        NEW.turn_id, NEW.id, NULL, NEW.run_id,
        jsonb_build_object('connector', NEW.connector, 'policy', NEW.policy, 'attempt', 1, 'reactor', NEW.lease_owner));
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_effect_leased_insert_event
    AFTER INSERT ON reckon_effects
    FOR EACH ROW WHEN (NEW.lease_token IS NOT NULL)
    EXECUTE FUNCTION reckon_effect_leased_insert_event();

-- What happens to an effect between transitions:
--   an attempt counted, still PENDING effect.accepted (the upstream will call back) or
--                                     effect.retrying (a retryable failure; tried again later)
--   a person's confirmation           tool.authorized (payload confirmed_by)
CREATE FUNCTION reckon_effect_progress_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    kind text;
    session text;
BEGIN
    IF NEW.confirmation = 'CONFIRMED' AND OLD.confirmation IS DISTINCT FROM 'CONFIRMED' THEN
        kind := 'tool.authorized';
    ELSIF NEW.state <> OLD.state THEN
        RETURN NULL; -- a transition: reckon_effect_transition wrote its event
    ELSIF NEW.attempts > OLD.attempts THEN
        kind := CASE WHEN NEW.correlation_id IS NOT NULL AND NEW.correlation_id IS DISTINCT FROM OLD.correlation_id
                     THEN 'effect.accepted' ELSE 'effect.retrying' END;
    ELSE
        RETURN NULL;
    END IF;
    IF NEW.turn_id IS NOT NULL THEN
        SELECT t.session_key INTO session FROM reckon_turns t WHERE t.id = NEW.turn_id;
    END IF;
    PERFORM reckon_emit(kind, NEW.tenant_id, session, NEW.turn_id, NEW.id, NULL, NEW.run_id,
        jsonb_build_object('connector', NEW.connector, 'policy', NEW.policy, 'state', NEW.state,
            'attempt', NEW.attempts,
            'error', CASE WHEN kind = 'effect.retrying' THEN NEW.error END,
            'correlation_id', CASE WHEN kind = 'effect.accepted' THEN NEW.correlation_id END,
            'confirmed_by', CASE WHEN kind = 'tool.authorized' THEN NEW.confirmation_by END,
            'reason', CASE WHEN kind = 'tool.authorized' THEN NEW.confirmation_reason END));
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_effect_progress_event
    AFTER UPDATE ON reckon_effects
    -- Not when the state changes (an outcome: reckon_effect_transition wrote its event), so that
    -- settling an effect queues no trigger.
    FOR EACH ROW WHEN (
        (NEW.attempts > OLD.attempts AND NEW.state = OLD.state)
        OR (NEW.confirmation = 'CONFIRMED' AND OLD.confirmation IS DISTINCT FROM 'CONFIRMED')
    )
    EXECUTE FUNCTION reckon_effect_progress_event();

-- A dispatch: River's claim of a dispatch job (state running, its attempt counted) is the durable
-- claim of the attempt, made before the call; the effects it carries that are still PENDING and
-- still its own are dispatched: effect.dispatched. (A job's later runs are claims too: the worker
-- then decides, by the effect's policy, whether to call again or resolve the outcome first.)
CREATE FUNCTION reckon_dispatch_event() RETURNS trigger
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

-- Its trigger on river_job is created by 0032, in a transaction of its own (see the locks above).

-- Sagas: saga.started, saga.resumed (RUNNING again), saga.completed, saga.compensating,
-- saga.compensated, saga.stuck.
CREATE FUNCTION reckon_saga_transition_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reckon_emit(
        CASE WHEN NEW.to_state = 'RUNNING' THEN CASE WHEN NEW.from_state IS NULL THEN 'saga.started' ELSE 'saga.resumed' END
             ELSE 'saga.' || lower(NEW.to_state::text) END,
        s.tenant_id, NULL, NULL, NULL, NEW.saga_id, NULL,
        jsonb_build_object('name', s.name, 'state', NEW.to_state, 'from', NEW.from_state, 'step', NEW.step,
            'actor', NEW.actor, 'reason', NEW.reason))
    FROM reckon_sagas s WHERE s.id = NEW.saga_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_saga_transition_event
    AFTER INSERT ON reckon_saga_transitions
    FOR EACH ROW EXECUTE FUNCTION reckon_saga_transition_event();

-- Turns: session.created (a session's first turn), turn.started (PROCESSING; session.resumed as
-- well when it is a retry of a failed or abandoned attempt), commit.reached, turn.completed,
-- turn.failed, turn.superseded with supersede.executed.
CREATE FUNCTION reckon_turn_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tenant text := split_part(NEW.session_key, ':', 1);
    base jsonb := jsonb_build_object('seq', NEW.seq, 'turn_group', NEW.turn_group, 'status', NEW.status,
        'attempt', NEW.attempt, 'channel', NEW.channel);
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.seq = 1 THEN
            PERFORM reckon_emit('session.created', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL, base);
        END IF;
        RETURN NULL;
    END IF;
    IF NEW.commit_point_reached AND NOT OLD.commit_point_reached THEN
        PERFORM reckon_emit('commit.reached', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL,
            base || jsonb_build_object('side_effects_executed', NEW.side_effects_executed));
    END IF;
    IF NEW.status IS NOT DISTINCT FROM OLD.status THEN
        RETURN NULL;
    END IF;
    IF NEW.status = 'PROCESSING' THEN
        IF NEW.attempt > 1 THEN
            PERFORM reckon_emit('session.resumed', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL, base);
        END IF;
        PERFORM reckon_emit('turn.started', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL,
            base || jsonb_build_object('messages', cardinality(NEW.message_ids), 'holder', NEW.holder));
    ELSIF NEW.status = 'COMPLETE' THEN
        PERFORM reckon_emit('turn.completed', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL,
            base || jsonb_build_object('side_effects_executed', NEW.side_effects_executed));
    ELSIF NEW.status = 'FAILED' THEN
        PERFORM reckon_emit('turn.failed', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL,
            base || jsonb_build_object('reason', NEW.status_reason));
    ELSIF NEW.status = 'SUPERSEDED' THEN
        PERFORM reckon_emit('turn.superseded', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL,
            base || jsonb_build_object('superseded_by', NEW.superseded_by, 'reason', NEW.status_reason));
        PERFORM reckon_emit('supersede.executed', tenant, NEW.session_key, NEW.id, NULL, NULL, NULL,
            base || jsonb_build_object('superseded_by', NEW.superseded_by, 'reason', NEW.status_reason));
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_turn_event
    AFTER INSERT OR UPDATE OF status, commit_point_reached ON reckon_turns
    FOR EACH ROW EXECUTE FUNCTION reckon_turn_event();

-- Supersede decisions: supersede.decision for each, turn.message_absorbed for an ABSORB.
CREATE FUNCTION reckon_turn_decision_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tenant text := split_part(NEW.session_key, ':', 1);
    body jsonb := jsonb_build_object('action', NEW.action, 'reason', NEW.reason, 'decider', NEW.decider,
        'message_ids', to_jsonb(NEW.message_ids));
BEGIN
    PERFORM reckon_emit('supersede.decision', tenant, NEW.session_key, NEW.turn_id, NULL, NULL, NULL, body);
    IF NEW.action = 'ABSORB' THEN
        PERFORM reckon_emit('turn.message_absorbed', tenant, NEW.session_key, NEW.turn_id, NULL, NULL, NULL, body);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_turn_decision_event
    AFTER INSERT ON reckon_turn_decisions
    FOR EACH ROW EXECUTE FUNCTION reckon_turn_decision_event();

-- A message that arrives while a turn of its session is in flight asks for a supersede decision:
-- supersede.requested.
CREATE FUNCTION reckon_message_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reckon_emit('supersede.requested', split_part(NEW.session_key, ':', 1), NEW.session_key, t.id,
        NULL, NULL, NULL, jsonb_build_object('message_id', NEW.message_id, 'message', NEW.id, 'channel', NEW.channel))
    FROM reckon_turns t
    WHERE t.session_key = NEW.session_key AND t.status IN ('PROCESSING', 'COMMITTING');
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_message_event
    AFTER INSERT ON reckon_messages
    FOR EACH ROW EXECUTE FUNCTION reckon_message_event();

-- Runs: run.created, run.cancelled.
CREATE FUNCTION reckon_run_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM reckon_emit('run.created', NEW.tenant_id, NULL, NULL, NULL, NULL, NEW.id,
            jsonb_build_object('max_steps', NEW.max_steps, 'max_consecutive_failures', NEW.max_consecutive_failures));
    ELSIF NEW.cancelled_at IS NOT NULL AND OLD.cancelled_at IS NULL THEN
        PERFORM reckon_emit('run.cancelled', NEW.tenant_id, NULL, NULL, NULL, NULL, NEW.id,
            jsonb_build_object('actor', NEW.cancelled_by, 'reason', NEW.cancel_reason));
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_run_event
    AFTER INSERT OR UPDATE OF cancelled_at ON reckon_runs
    FOR EACH ROW EXECUTE FUNCTION reckon_run_event();
-- reckon_event_log: the stream, in position order (xid, seq) for readers that keep below
-- pg_snapshot_xmin(pg_current_snapshot()). An effect's events from its history:
--   recorded                          tool.authorized (effect.awaiting_confirmation when held,
--                                     effect.compensation for a compensation)
--   → CONFIRMED / FAILED              tool.executed / tool.failed
--   → UNKNOWN / STUCK / PENDING       effect.unknown / effect.stuck / effect.retried
--   a row that changes nothing        effect.observed (a late outcome, a confirmation decision, an
--                                     inconclusive status check)
CREATE VIEW reckon_event_log AS
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
