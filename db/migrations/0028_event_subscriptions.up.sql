-- Webhook subscriptions (docs/api.md, "Webhook subscriptions"): the events matching a subscription
-- are POSTed to its URL, in log order, by effects of the built-in connector reckon.webhook — so a
-- delivery is retried, reconciled, audited and can go STUCK like any other effect.
--
-- position is the last event handed to delivery (xid, seq; at creation the log's head). At most
-- one delivery is in flight per subscription (delivery_effect_id); it carries the events after
-- delivery_from up to position. Its enqueue and the advance of position commit together. When it
-- ends FAILED or STUCK the subscription is paused and position goes back to delivery_from, so a
-- resume delivers the same events again: none is skipped.
CREATE TABLE reckon_event_subscriptions (
    id                 uuid PRIMARY KEY,
    -- NULL: the events of every tenant (a subscription of the system's).
    tenant_id          text CHECK (tenant_id <> ''),
    url                text NOT NULL CHECK (url ~ '^https?://' AND octet_length(url) <= 2048),
    -- Event type patterns ("*", "turn.*", "turn.completed"); empty: every type.
    patterns           text[] NOT NULL DEFAULT '{}',
    -- The key of the Reckon-Signature header: HMAC-SHA256 over "<t>.<body>".
    secret             text NOT NULL CHECK (secret <> ''),
    position_xid       xid8 NOT NULL,
    position_seq       bigint NOT NULL,
    delivery_effect_id uuid,
    delivery_from_xid  xid8,
    delivery_from_seq  bigint,
    -- Counts resumes: part of each delivery's idempotency key, so that the batch of a failed
    -- delivery is delivered again, by a new effect, after a resume.
    resumes            integer NOT NULL DEFAULT 0,
    state              text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused')),
    paused_reason      text,
    created_by         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((delivery_effect_id IS NULL) = (delivery_from_xid IS NULL) AND (delivery_from_xid IS NULL) = (delivery_from_seq IS NULL)),
    CHECK ((state = 'paused') = (paused_reason IS NOT NULL))
);

CREATE INDEX reckon_event_subscriptions_tenant_idx ON reckon_event_subscriptions (tenant_id, created_at, id);
CREATE UNIQUE INDEX reckon_event_subscriptions_delivery_idx ON reckon_event_subscriptions (delivery_effect_id)
    WHERE delivery_effect_id IS NOT NULL;

-- Retention keeps a partition of the events that an active subscription has not delivered yet:
-- one with an event after the subscription's position (after delivery_from while a delivery is in
-- flight, since a failed delivery goes back to it). A drop of events (or of effect transitions, which
-- are events too) records its last position in reckon_events_dropped (0027). Otherwise as in 0016.
CREATE OR REPLACE FUNCTION reckon_audit_drop_partition(name text, cutoff timestamptz, actor text, reason text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    p reckon_audit_partitions;
    held boolean := false;
    n bigint;
    last_xid xid8;
    last_seq bigint;
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
        -- Effect transitions are events too (reckon_event_log): held like the events below.
        IF NOT held THEN
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM reckon_event_subscriptions s WHERE s.state = ''active''
                AND EXISTS (SELECT 1 FROM %I t WHERE t.xid IS NOT NULL AND (t.xid, t.id) > (coalesce(s.delivery_from_xid, s.position_xid),
                                                                       coalesce(s.delivery_from_seq, s.position_seq))))', name) INTO held;
        END IF;
    ELSIF p.parent = 'reckon_saga_transitions' THEN
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM reckon_sagas s WHERE s.created_at < $1
            AND EXISTS (SELECT 1 FROM %I t WHERE t.saga_id = s.id))', name) INTO held USING p.range_to;
    ELSIF p.parent = 'reckon_events' THEN
        -- No lock needed: a position only moves forward, but for a failed delivery's, which moves
        -- back to delivery_from, counted here already; a new subscription starts at the head.
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM reckon_event_subscriptions s WHERE s.state = ''active''
            AND EXISTS (SELECT 1 FROM %I e WHERE (e.xid, e.seq) > (coalesce(s.delivery_from_xid, s.position_xid),
                                                                   coalesce(s.delivery_from_seq, s.position_seq))))', name) INTO held;
    END IF;
    IF held THEN
        RETURN NULL;
    END IF;
    -- Events: remember the last position dropped, so that a reader behind it is told it missed some.
    IF p.parent IN ('reckon_events', 'reckon_effect_transitions') THEN
        EXECUTE format('SELECT xid, %s FROM %I WHERE xid IS NOT NULL ORDER BY xid DESC, 2 DESC LIMIT 1',
            CASE p.parent WHEN 'reckon_events' THEN 'seq' ELSE 'id' END, name) INTO last_xid, last_seq;
        IF last_xid IS NOT NULL THEN
            INSERT INTO reckon_events_dropped (xid, seq) VALUES (last_xid, last_seq)
            ON CONFLICT (id) DO UPDATE SET xid = excluded.xid, seq = excluded.seq, at = now()
            WHERE (reckon_events_dropped.xid, reckon_events_dropped.seq) < (excluded.xid, excluded.seq);
        END IF;
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
