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
UPDATE reckon_tenants
SET disabled_at = CASE WHEN @disabled::boolean THEN coalesce(disabled_at, now()) END
WHERE id = @id
RETURNING *;
