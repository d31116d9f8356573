-- name: EffectTombstoneGetLive :one
-- The tombstone keeping a tenant's idempotency key after its effect was pruned, while its dedup
-- window lasts (expires_at in the future). No row: the key is free.
SELECT * FROM reckon_effect_tombstones
WHERE tenant_id = @tenant_id AND idempotency_key = @idempotency_key AND expires_at > now();
