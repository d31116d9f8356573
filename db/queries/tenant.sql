-- name: TenantInsert :one
-- Creates a tenant; no row when the id is taken.
INSERT INTO reckon_tenants (id, name) VALUES (@id, @name)
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: TenantGet :one
SELECT * FROM reckon_tenants WHERE id = @id;

-- name: TenantList :many
SELECT * FROM reckon_tenants ORDER BY id;

-- name: TenantSetDisabled :one
-- Disables (disabled = true) or re-enables a tenant. No row when there is no such tenant.
-- (reckon_pick: Citus refuses now() in a CASE or COALESCE.)
UPDATE reckon_tenants
SET disabled_at = reckon_pick(@disabled::boolean, reckon_pick(disabled_at IS NULL, now(), disabled_at), NULL)
WHERE id = @id
RETURNING *;
