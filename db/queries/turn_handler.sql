-- name: TurnHandlerUpsert :one
-- Sets a tenant's HTTP turn handler; inserted is true for a new one.
-- (updated_at comes from the VALUES: Citus refuses now() in DO UPDATE SET.)
INSERT INTO reckon_turn_handlers (tenant_id, url, timeout_ms, updated_at)
VALUES (@tenant_id, @url, @timeout_ms, now())
ON CONFLICT (tenant_id) DO UPDATE SET url = excluded.url, timeout_ms = excluded.timeout_ms, updated_at = excluded.updated_at
RETURNING sqlc.embed(reckon_turn_handlers), (xmax = 0)::boolean AS inserted;

-- name: TurnHandlerGet :one
SELECT * FROM reckon_turn_handlers WHERE tenant_id = @tenant_id;

-- name: TurnHandlerDelete :execrows
DELETE FROM reckon_turn_handlers WHERE tenant_id = @tenant_id;
