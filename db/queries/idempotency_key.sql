-- name: IdempotencyKeyGet :one
SELECT * FROM reckon_idempotency_keys WHERE tenant_id = @tenant_id AND key = @key;

-- name: IdempotencyKeyClaim :one
-- Claims a key for the request running in this transaction. No row when the key is taken. A
-- concurrent transaction holding a claim on the same key makes this one wait for its outcome: if it
-- commits, the key is taken; if it rolls back, this claim succeeds.
INSERT INTO reckon_idempotency_keys (tenant_id, key, method, path, request_sha256)
VALUES (@tenant_id, @key, @method, @path, @request_sha256)
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING tenant_id;

-- name: IdempotencyKeyComplete :exec
-- Stores the response of the request that claimed the key, in the claiming transaction.
UPDATE reckon_idempotency_keys SET status = @status, response = @response
WHERE tenant_id = @tenant_id AND key = @key;
