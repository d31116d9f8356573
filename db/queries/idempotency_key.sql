-- name: IdempotencyKeyGet :one
-- The key's stored request and response, unless it was claimed more than ttl_seconds ago (past the
-- TTL: as if it had been purged already).
SELECT * FROM reckon_idempotency_keys
WHERE tenant_id = @tenant_id AND key = @key AND created_at >= now() - make_interval(secs => @ttl_seconds::double precision);

-- name: IdempotencyKeyClaim :one
-- Claims a key for the request running in this transaction. No row when the key is taken; a key
-- claimed more than ttl_seconds ago (past the TTL, not purged yet) is free and claimed afresh. A
-- concurrent transaction holding a claim on the same key makes this one wait for its outcome: if it
-- commits, the key is taken; if it rolls back, this claim succeeds.
-- (now() comes in the VALUES and is read as excluded.created_at: Citus refuses a function that is
-- not IMMUTABLE in DO UPDATE SET or its WHERE.)
INSERT INTO reckon_idempotency_keys AS k (tenant_id, key, method, path, request_sha256, created_at)
VALUES (@tenant_id, @key, @method, @path, @request_sha256, now())
ON CONFLICT (tenant_id, key) DO UPDATE
SET method = excluded.method, path = excluded.path, request_sha256 = excluded.request_sha256,
    status = NULL, response = NULL, created_at = excluded.created_at
WHERE excluded.created_at - k.created_at > make_interval(secs => @ttl_seconds::double precision)
RETURNING tenant_id;

-- name: IdempotencyKeyComplete :exec
-- Stores the response of the request that claimed the key, in the claiming transaction.
UPDATE reckon_idempotency_keys SET status = @status, response = @response
WHERE tenant_id = @tenant_id AND key = @key;
