-- Webhook subscriptions (migration 0028). Positions go in and out as bigints (xid8 through text),
-- like the events' (events.sql). A NULL tenant scope is the system's: every subscription.

-- name: EventSubscriptionInsert :one
-- A new subscription, positioned at the log's head: the last event below the horizon (0, 0 when
-- there is none), so that it delivers the events written from now on. The head is read in a CTE,
-- not in a subquery within the VALUES, which Citus refuses.
WITH head AS MATERIALIZED (
    SELECT xid, seq FROM reckon_event_log WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY xid DESC, seq DESC LIMIT 1
)
INSERT INTO reckon_event_subscriptions (id, tenant_id, url, patterns, secret, position_xid, position_seq, created_by)
SELECT @id, sqlc.narg(tenant_id)::text, @url, @patterns::text[], @secret,
       coalesce((SELECT xid FROM head), '0'::xid8), coalesce((SELECT seq FROM head), 0), @created_by
RETURNING id, tenant_id, url, patterns, position_xid::text::bigint AS position_xid, position_seq,
          delivery_effect_id, state, paused_reason, created_by, created_at, updated_at;

-- name: EventSubscriptionGet :one
SELECT id, tenant_id, url, patterns, position_xid::text::bigint AS position_xid, position_seq,
       delivery_effect_id, state, paused_reason, created_by, created_at, updated_at
FROM reckon_event_subscriptions
WHERE id = @id AND (sqlc.narg(scope)::text IS NULL OR tenant_id = sqlc.narg(scope)::text);

-- name: EventSubscriptionList :many
-- The subscriptions in a scope, oldest first, after a cursor (created_at, id).
SELECT id, tenant_id, url, patterns, position_xid::text::bigint AS position_xid, position_seq,
       delivery_effect_id, state, paused_reason, created_by, created_at, updated_at
FROM reckon_event_subscriptions
WHERE (sqlc.narg(scope)::text IS NULL OR tenant_id = sqlc.narg(scope)::text)
  AND (sqlc.narg(after_created_at)::timestamptz IS NULL
       OR (created_at, id) > (sqlc.narg(after_created_at)::timestamptz, @after_id::uuid))
ORDER BY created_at, id
LIMIT @max_rows;

-- name: EventSubscriptionDelete :execrows
DELETE FROM reckon_event_subscriptions
WHERE id = @id AND (sqlc.narg(scope)::text IS NULL OR tenant_id = sqlc.narg(scope)::text);

-- name: EventSubscriptionPause :one
-- Pauses an active subscription; its delivery in flight, if any, still ends.
UPDATE reckon_event_subscriptions SET state = 'paused', paused_reason = @reason, updated_at = now()
WHERE id = @id AND (sqlc.narg(scope)::text IS NULL OR tenant_id = sqlc.narg(scope)::text)
RETURNING id;

-- name: EventSubscriptionResume :one
-- Resumes a paused subscription (an active one stays as it is): the deliverer delivers from its
-- position, which a failed delivery put back before its batch.
UPDATE reckon_event_subscriptions
SET state = 'active', paused_reason = NULL, updated_at = now(),
    resumes = resumes + CASE WHEN state = 'paused' THEN 1 ELSE 0 END
WHERE id = @id AND (sqlc.narg(scope)::text IS NULL OR tenant_id = sqlc.narg(scope)::text)
RETURNING id;

-- name: EventSubscriptionDue :many
-- The active subscriptions with no delivery in flight.
SELECT id FROM reckon_event_subscriptions
WHERE state = 'active' AND delivery_effect_id IS NULL
ORDER BY updated_at, id
LIMIT @max_rows;

-- name: EventSubscriptionLockDue :one
-- Locks a subscription that is still due for the transaction that hands its next batch to
-- delivery; another deliverer skips it meanwhile.
SELECT id, tenant_id, patterns, position_xid::text::bigint AS position_xid, position_seq, resumes
FROM reckon_event_subscriptions
WHERE id = @id AND state = 'active' AND delivery_effect_id IS NULL
FOR UPDATE SKIP LOCKED;

-- name: EventSubscriptionAdvance :exec
-- Moves a locked subscription's position to the last event read; with a delivery, records it and
-- where its batch starts.
UPDATE reckon_event_subscriptions
SET position_xid = (@position_xid::bigint)::text::xid8, position_seq = @position_seq,
    delivery_effect_id = sqlc.narg(delivery_effect_id)::uuid,
    delivery_from_xid = CASE WHEN sqlc.narg(delivery_effect_id)::uuid IS NULL THEN NULL ELSE position_xid END,
    delivery_from_seq = CASE WHEN sqlc.narg(delivery_effect_id)::uuid IS NULL THEN NULL ELSE position_seq END,
    updated_at = now()
WHERE id = @id;

-- name: EventSubscriptionDelivered :execrows
-- The delivery in flight was confirmed: the next batch may go.
UPDATE reckon_event_subscriptions
SET delivery_effect_id = NULL, delivery_from_xid = NULL, delivery_from_seq = NULL, updated_at = now()
WHERE delivery_effect_id = @effect_id;

-- name: EventSubscriptionDeliveryFailed :execrows
-- The delivery in flight ended FAILED or STUCK: the subscription is paused and goes back before the
-- batch, which a resume delivers again.
UPDATE reckon_event_subscriptions
SET position_xid = delivery_from_xid, position_seq = delivery_from_seq,
    delivery_effect_id = NULL, delivery_from_xid = NULL, delivery_from_seq = NULL,
    state = 'paused', paused_reason = @reason, updated_at = now()
WHERE delivery_effect_id = @effect_id;

-- name: EventSubscriptionTarget :one
-- Where a delivery goes and the key it is signed with.
SELECT url, secret FROM reckon_event_subscriptions WHERE id = @id;

-- name: EventSubscriptionWake :exec
-- Wakes the deliverers when the transaction commits: a delivery settled, a subscription was made
-- or resumed.
SELECT pg_notify('reckon_webhooks', '');
