-- Ordering keys (docs/design.md, "Ordering keys"): the effects of one tenant with the same
-- ordering_key are dispatched one at a time, in enqueue order (order_seq). An ordered effect is
-- recorded "waiting" — PENDING with neither job, lease nor queue, its claimers' queue kept in
-- order_queue — unless its key has no unsettled effect; then it is recorded with its queue, as
-- any effect left to the claimers. The settlement (CONFIRMED or FAILED) of an ordered effect hands
-- the key on in the same transaction: reckon_order_hand_on gives the key's next unsettled effect
-- its queue and wakes the claimers of that queue. Enqueues and hand-ons of one key serialise on a
-- transaction advisory lock of the key, so that neither misses the other. The columns are nullable
-- without defaults: adding them rewrites no rows, and unordered effects leave them NULL.
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS ordering_key text;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS order_seq bigint;
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS order_queue text;
-- not_before: an ordered effect enqueued with ScheduledAt is dispatched no earlier, once its turn
-- has come (the claimer schedules its job then).
ALTER TABLE reckon_effects ADD COLUMN IF NOT EXISTS not_before timestamptz;
CREATE SEQUENCE IF NOT EXISTS reckon_effects_order_seq;

-- Their index, reckon_effects_ordering_idx, is built CONCURRENTLY by 0040_ordering_index: this
-- migration's functions need a transaction, and a plain build would hold writers for a table read.

-- reckon_order_lock takes the transaction advisory lock of a tenant's ordering key.
CREATE OR REPLACE FUNCTION reckon_order_lock(tenant text, key text) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(1869767012, hashtext(length(tenant)::text || ':' || tenant || key));
$$;

-- reckon_order_hand_on_key gives a tenant's ordering key its next turn if none of its unsettled
-- effects has one: under the key's lock, when every unsettled effect of the key is waiting, the
-- first of them (by order_seq) gets its queue and its claimers are woken (reckon_claim, as an
-- enqueue wakes them). An effect has the key's turn from then until it is settled — claimed,
-- called, retried, UNKNOWN, STUCK, accepted awaiting its callback. Each statement of a plpgsql
-- function reads a fresh snapshot, so the reads after the lock see every enqueue that held it.
-- The enqueues call it after recording ordered effects, and a settlement through the trigger.
CREATE OR REPLACE FUNCTION reckon_order_hand_on_key(p_tenant text, p_key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    next_queue text;
BEGIN
    PERFORM reckon_order_lock(p_tenant, p_key);
    IF EXISTS (
        SELECT 1 FROM reckon_effects
        WHERE tenant_id = p_tenant AND ordering_key = p_key AND state IN ('PENDING', 'UNKNOWN', 'STUCK')
          AND NOT (state = 'PENDING' AND queue IS NULL AND job_id IS NULL AND lease_token IS NULL)
    ) THEN
        RETURN; -- the key's turn is taken
    END IF;
    UPDATE reckon_effects e SET queue = e.order_queue
    FROM (
        SELECT id FROM reckon_effects
        WHERE tenant_id = p_tenant AND ordering_key = p_key AND state IN ('PENDING', 'UNKNOWN', 'STUCK')
        ORDER BY order_seq, id
        LIMIT 1
    ) head
    WHERE e.id = head.id AND e.order_queue IS NOT NULL
    RETURNING e.queue INTO next_queue;
    IF next_queue IS NOT NULL THEN
        PERFORM pg_notify('reckon_claim', next_queue);
    END IF;
END
$$;

-- reckon_order_hand_on: the settlement (CONFIRMED or FAILED) of an ordered effect hands its key
-- on, in the settling transaction.
CREATE OR REPLACE FUNCTION reckon_order_hand_on() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reckon_order_hand_on_key(NEW.tenant_id, NEW.ordering_key);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS reckon_effect_order_hand_on ON reckon_effects;
CREATE TRIGGER reckon_effect_order_hand_on
    AFTER UPDATE OF state ON reckon_effects
    FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL AND NEW.state IN ('CONFIRMED', 'FAILED') AND OLD.state NOT IN ('CONFIRMED', 'FAILED'))
    EXECUTE FUNCTION reckon_order_hand_on();

-- A stored connector may make its effects' ordering key from fields of their args, as it makes
-- their business key.
ALTER TABLE reckon_connectors ADD COLUMN IF NOT EXISTS ordering_key_fields text[] NOT NULL DEFAULT '{}';
