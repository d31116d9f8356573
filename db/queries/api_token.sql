-- name: APITokenInsert :one
INSERT INTO reckon_api_tokens (id, tenant_id, name, prefix, token_sha256, admin)
VALUES (@id, @tenant_id, @name, @prefix, @token_sha256, @admin)
RETURNING *;

-- name: APITokenAuthenticate :one
-- The live token with this SHA-256, with its tenant: no row when the token is unknown or revoked,
-- or its tenant is disabled.
SELECT t.*
FROM reckon_api_tokens t
JOIN reckon_tenants tenant ON tenant.id = t.tenant_id
WHERE t.token_sha256 = @token_sha256
  AND t.revoked_at IS NULL
  AND tenant.disabled_at IS NULL;

-- name: APITokenListByTenant :many
SELECT * FROM reckon_api_tokens WHERE tenant_id = @tenant_id ORDER BY created_at, id;

-- name: APITokenRevoke :one
-- Revokes a token (a second revoke keeps the first time). No row when there is no such token.
UPDATE reckon_api_tokens SET revoked_at = coalesce(revoked_at, now())
WHERE id = @id
RETURNING *;
