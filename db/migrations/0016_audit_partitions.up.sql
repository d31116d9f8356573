-- The audit trail partitioned by time, and what retention needs (docs/operations.md, Retention).
--
-- The append-only histories — reckon_effect_transitions, reckon_saga_transitions and
-- reckon_definition_changes — become tables range-partitioned on their column at: one partition per
-- month by default (per day if reckon_audit_settings says so). Rows stay append-only: UPDATE and
-- DELETE are refused on every partition by a row trigger the partitions inherit, TRUNCATE by a
-- statement trigger on the parent and on each partition. History leaves only as whole partitions,
-- dropped by reckon_audit_drop_partition once they are older than the audit retention and no
-- effect or saga they tell of is left, and every drop is recorded in reckon_audit_drops, which is
-- never pruned.
--
-- Upgrading keeps every row without copying it: the existing table becomes the first partition
-- (<table>_p0, everything before the start of the next period), and the next periods get
-- partitions of their own. A default partition (<table>_default) takes a row that no partition
-- covers, so an insert never fails for want of one; creating the partition of that range later
-- moves such rows into it.
--
-- The functions that create and drop partitions run with the rights of the tables' owner (SECURITY
-- DEFINER), so an application role that does not own the tables can keep the partitions and run
-- retention.

-- Locks, taken first and all at once (docs/operations.md, "Upgrades"), because this migration runs
-- while the previous version's servers and reactors write, in the order
-- that code takes them: settling an effect updates it and writes its transition (trigger), then,
-- for a saga's step, updates the saga and writes the saga's transition (settle hook); definition
-- changes are written alone. All ACCESS EXCLUSIVE: the histories are renamed and partitioned, and
-- dropping the saga history's foreign key takes reckon_sagas too.
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
            (1, 'reckon_effect_transitions', 'ACCESS EXCLUSIVE'),
            (2, 'reckon_sagas', 'ACCESS EXCLUSIVE'),
            (3, 'reckon_saga_transitions', 'ACCESS EXCLUSIVE'),
            (4, 'reckon_definition_changes', 'ACCESS EXCLUSIVE')
        ) AS l(n, tab, mode) ORDER BY l.n
    LOOP
        PERFORM set_config('lock_timeout',
            greatest(1, ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000))::bigint::text, true);
        EXECUTE format('LOCK TABLE %I IN %s MODE', target.tab, target.mode);
    END LOOP;
    PERFORM set_config('lock_timeout', saved, true);
END;
$$;

-- How the histories are cut. Changing period affects the partitions created afterwards only.
CREATE TABLE reckon_audit_settings (
    id      smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    period  text NOT NULL DEFAULT 'month' CHECK (period IN ('day', 'month')),
    -- How far ahead of now partitions exist (reckon_audit_ensure_partitions).
    premake interval NOT NULL DEFAULT '62 days' CHECK (premake >= interval '1 day' AND premake <= interval '400 days')
);

INSERT INTO reckon_audit_settings DEFAULT VALUES;

-- The partitions of the histories (the default partitions excepted), kept by the functions below.
CREATE TABLE reckon_audit_partitions (
    partition  text PRIMARY KEY,
    parent     text NOT NULL CHECK (parent IN ('reckon_effect_transitions', 'reckon_saga_transitions', 'reckon_definition_changes')),
    range_from timestamptz, -- NULL: from the beginning (the _p0 partition)
    range_to   timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (range_from IS NULL OR range_from < range_to)
);

CREATE INDEX reckon_audit_partitions_parent_idx ON reckon_audit_partitions (parent, range_to);

-- Every partition of audit history ever dropped: what range, how many rows, when, by whom. Never
-- pruned, append-only.
CREATE TABLE reckon_audit_drops (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent     text NOT NULL,
    partition  text NOT NULL,
    range_from timestamptz,
    range_to   timestamptz NOT NULL,
    row_count  bigint NOT NULL CHECK (row_count >= 0),
    dropped_by text NOT NULL CHECK (dropped_by <> ''),
    reason     text NOT NULL CHECK (reason <> ''),
    dropped_at timestamptz NOT NULL DEFAULT now()
);

-- One append-only guard for every history. The error names the history, and the partition in its
-- detail.
CREATE FUNCTION reckon_audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    history text := coalesce((SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = TG_RELID), TG_TABLE_NAME);
BEGIN
    RAISE EXCEPTION 'reckon: % is append-only (% refused)', history, TG_OP
        USING ERRCODE = 'insufficient_privilege', DETAIL = format('table %s', TG_TABLE_NAME);
END;
$$;

CREATE TRIGGER reckon_audit_drops_append_only
    BEFORE UPDATE OR DELETE ON reckon_audit_drops
    FOR EACH ROW EXECUTE FUNCTION reckon_audit_append_only();

CREATE TRIGGER reckon_audit_drops_no_truncate
    BEFORE TRUNCATE ON reckon_audit_drops
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only();

-- reckon_audit_add_partition attaches the partition [range_from, range_to) of parent, moving into
-- it the rows the default partition took for that range. The new table is built apart and then
-- attached, which locks the parent only against other schema changes (SHARE UPDATE EXCLUSIVE), not
-- against inserts.
CREATE FUNCTION reckon_audit_add_partition(parent text, range_from timestamptz, range_to timestamptz)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    name text := format('%s_p%s', parent, to_char(range_from AT TIME ZONE 'UTC', 'YYYYMMDD'));
    fallback text := parent || '_default';
    moved bigint;
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, parent);
    EXECUTE format('INSERT INTO %I SELECT * FROM %I WHERE at >= $1 AND at < $2', name, fallback)
        USING range_from, range_to;
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF moved > 0 THEN
        -- The one delete the histories allow: rows that have just been copied to their partition.
        EXECUTE format('ALTER TABLE %I DISABLE TRIGGER USER', fallback);
        EXECUTE format('DELETE FROM %I WHERE at >= $1 AND at < $2', fallback) USING range_from, range_to;
        EXECUTE format('ALTER TABLE %I ENABLE TRIGGER USER', fallback);
        RAISE NOTICE 'reckon: moved % rows of % from % into %', moved, parent, fallback, name;
    END IF;
    -- The range as a constraint spares ATTACH a scan of the new table.
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (at >= %L AND at < %L)',
        name, name || '_range', range_from, range_to);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
        parent, name, range_from, range_to);
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', name, name || '_range');
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only()',
        name || '_no_truncate', name);
    INSERT INTO reckon_audit_partitions (partition, parent, range_from, range_to)
    VALUES (name, parent, range_from, range_to);
    RETURN name;
END;
$$;

-- reckon_audit_ensure_partitions creates the partitions of parent from the end of its last one up
-- to now + premake (reckon_audit_settings), one period each, with bounds at UTC midnight (and the
-- first of the month for monthly ones). It returns how many it created. The engine calls it with
-- every retention run and when a reactor starts; after a long stop it also fills the gap, moving
-- the rows the default partition took meanwhile.
CREATE FUNCTION reckon_audit_ensure_partitions(parent text, at timestamptz DEFAULT now())
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    settings reckon_audit_settings;
    step interval;
    lo timestamptz;
    hi timestamptz;
    created integer := 0;
BEGIN
    SELECT * INTO STRICT settings FROM reckon_audit_settings;
    step := CASE settings.period WHEN 'day' THEN interval '1 day' ELSE interval '1 month' END;
    -- One ensure at a time per history: two would try to create the same partition.
    PERFORM pg_advisory_xact_lock(hashtext('reckon_audit_ensure_partitions'), hashtext(parent));
    SELECT max(p.range_to) INTO lo FROM reckon_audit_partitions p WHERE p.parent = reckon_audit_ensure_partitions.parent;
    IF lo IS NULL THEN
        RAISE EXCEPTION 'reckon: % has no partitions', parent USING ERRCODE = 'undefined_table';
    END IF;
    WHILE lo < at + settings.premake LOOP
        hi := date_trunc(settings.period, lo + step, 'UTC');
        PERFORM reckon_audit_add_partition(parent, lo, hi);
        created := created + 1;
        lo := hi;
    END LOOP;
    RETURN created;
END;
$$;

-- reckon_audit_drop_partition detaches and drops one partition of a history whose range ends at or
-- before cutoff, and records the drop. It drops nothing and returns NULL while the partition still
-- tells of an effect (or a saga) that exists, so that no effect is ever shown with half its
-- history; otherwise it returns the number of rows dropped.
CREATE FUNCTION reckon_audit_drop_partition(name text, cutoff timestamptz, actor text, reason text)
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

-- The audit views read reckon_effect_transitions: they are built again on the partitioned table.
DROP VIEW reckon_audit_stuck;
DROP VIEW reckon_audit_effects;
DROP VIEW reckon_audit_transitions;

-- Saga history outlives its saga, as effect history outlives its effect: no foreign key, and
-- append-only like the others.
ALTER TABLE reckon_saga_transitions DROP CONSTRAINT reckon_saga_transitions_saga_id_fkey;

DROP TRIGGER reckon_effect_transitions_append_only ON reckon_effect_transitions;
DROP TRIGGER reckon_effect_transitions_no_truncate ON reckon_effect_transitions;
DROP FUNCTION reckon_effect_transitions_append_only();
DROP TRIGGER reckon_definition_changes_append_only ON reckon_definition_changes;
DROP TRIGGER reckon_definition_changes_no_truncate ON reckon_definition_changes;
DROP FUNCTION reckon_definition_changes_append_only();

-- The conversion, done in plpgsql so that sqlc (which reads these files) keeps seeing each table
-- with the columns it had: the table becomes <table>_p0 and a partitioned table of the same
-- columns, indexes and checks takes its name.
DO $$
DECLARE
    parent text;
    first text;
    cutover timestamptz := date_trunc('month', now(), 'UTC') + interval '1 month';
    next_id bigint;
    idx record;
BEGIN
    FOREACH parent IN ARRAY ARRAY['reckon_effect_transitions', 'reckon_saga_transitions', 'reckon_definition_changes'] LOOP
        first := parent || '_p0';
        EXECUTE format('SELECT coalesce(max(id), 0) + 1 FROM %I', parent) INTO next_id;
        EXECUTE format('ALTER TABLE %I RENAME TO %I', parent, first);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY', first);
        EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', first, parent || '_pkey', first || '_pkey');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (at)', parent, first);
        EXECUTE format('CREATE SEQUENCE %I OWNED BY %I.id START %s', parent || '_id_seq', parent, next_id);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id SET DEFAULT nextval(%L)', parent, parent || '_id_seq');
        -- Every index but the primary key, on the parent under its old name; ATTACH adopts the
        -- old table's index instead of building a new one.
        FOR idx IN
            SELECT i.relname AS name, pg_get_indexdef(i.oid) AS def
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
            WHERE x.indrelid = first::regclass AND NOT x.indisprimary
            ORDER BY i.relname
        LOOP
            EXECUTE format('ALTER INDEX %I RENAME TO %I', idx.name, idx.name || '_p0');
            EXECUTE regexp_replace(idx.def, ' ON \S+ USING ', format(' ON %I USING ', parent));
        END LOOP;
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', parent, first, cutover);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', parent || '_default', parent);
        EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION reckon_audit_append_only()',
            parent || '_append_only', parent);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only()',
            parent || '_no_truncate', parent);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only()',
            first || '_no_truncate', first);
        EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION reckon_audit_append_only()',
            parent || '_default_no_truncate', parent || '_default');
        INSERT INTO reckon_audit_partitions (partition, parent, range_from, range_to) VALUES (first, parent, NULL, cutover);
        PERFORM reckon_audit_ensure_partitions(parent);
    END LOOP;
END;
$$;

-- The audit views (docs/audit.md), as before on the partitioned table; reckon_audit_transitions keeps
-- the transitions of pruned effects.
-- reckon_audit_transitions: every transition, with what it was a transition of (NULL once the effect
-- has been pruned: its history stays until its partition is dropped).
CREATE VIEW reckon_audit_transitions AS
SELECT t.id, t.effect_id, t.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key,
       e.run_id, t.from_state, t.to_state, t.actor, t.reason, t.attempt, t.at, t.detail,
       (t.from_state IS NOT DISTINCT FROM t.to_state) AS observation
FROM reckon_effect_transitions t
LEFT JOIN reckon_effects e ON e.id = t.effect_id;

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

-- Retention (docs/operations.md): how long settled work is kept per tenant, over the global
-- setting of the retention job.
CREATE TABLE reckon_retention_policies (
    tenant_id        text PRIMARY KEY CHECK (tenant_id <> ''),
    -- How long a settled effect of the tenant is kept, in seconds (at least an hour).
    effect_retention_seconds bigint NOT NULL CHECK (effect_retention_seconds >= 3600),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- What is left of a pruned effect while its dedup window lasts: its idempotency key, so that a
-- late duplicate enqueue is recognised instead of performing the call again.
CREATE TABLE reckon_effect_tombstones (
    tenant_id       text NOT NULL,
    idempotency_key text NOT NULL,
    effect_id       uuid NOT NULL,
    state           reckon_effect_state NOT NULL CHECK (state IN ('CONFIRMED', 'FAILED')),
    settled_at      timestamptz NOT NULL,
    pruned_at       timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);

CREATE INDEX reckon_effect_tombstones_expires_idx ON reckon_effect_tombstones (expires_at);

-- One row per retention run: who ran it, what it removed, how it ended.
CREATE TABLE reckon_retention_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor       text NOT NULL CHECK (actor <> ''),
    dry_run     boolean NOT NULL DEFAULT false,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    -- Rows removed (or, for a dry run, that would be) per table, and partitions dropped.
    removed     jsonb NOT NULL DEFAULT '{}',
    error       text
);

CREATE INDEX reckon_retention_runs_started_idx ON reckon_retention_runs (started_at);
