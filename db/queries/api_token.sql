-- name: APITokenInsert :one
-- A tenant token (tenant_id set, system false) or a system token (tenant_id NULL, system true).
INSERT INTO reckon_api_tokens (id, tenant_id, name, prefix, token_sha256, admin, system)
VALUES (@id, @tenant_id, @name, @prefix, @token_sha256, @admin, @system)
RETURNING *;

-- name: APITokenAuthenticate :one
-- The live token with this SHA-256: no row when the token is unknown or revoked, or it is a
-- tenant's token and its tenant is disabled. A system token has no tenant.
SELECT t.*
FROM reckon_api_tokens t
LEFT JOIN reckon_tenants tenant ON tenant.id = t.tenant_id
WHERE t.token_sha256 = @token_sha256
  AND t.revoked_at IS NULL
  AND (t.system OR tenant.disabled_at IS NULL AND tenant.id IS NOT NULL);

-- name: APITokenListByTenant :many
SELECT * FROM reckon_api_tokens WHERE tenant_id = sqlc.arg(tenant_id)::text ORDER BY created_at, id;

-- name: APITokenListSystem :many
SELECT * FROM reckon_api_tokens WHERE system ORDER BY created_at, id;

-- name: APITokenRevoke :one
-- Revokes a token (a second revoke keeps the first time). No row when there is no such token.
-- (reckon_pick: Citus refuses now() in a COALESCE.)
UPDATE reckon_api_tokens SET revoked_at = reckon_pick(revoked_at IS NULL, now(), revoked_at)
WHERE id = @id
RETURNING *;
