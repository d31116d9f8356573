-- name: EffectTransitionListByEffects :many
-- The audit trails of effects (one or a page of them), each oldest first:
-- reckon_effect_transitions_effect_idx (effect_id, id) of each partition.
SELECT * FROM reckon_effect_transitions WHERE effect_id = ANY (@effect_ids::uuid[]) ORDER BY effect_id, id;

-- name: EffectObservationInsert :exec
-- Records in the audit trail what a fenced-out writer saw (a late outcome) without changing the
-- effect: from_state and to_state are both the effect's current state (reckon_effect_observe,
-- 0042, called for the effect's row: on a Citus cell, on the cell's worker).
SELECT reckon_effect_observe(e.id, @actor::text, @reason::text, sqlc.narg(detail)::jsonb)
FROM reckon_effects e WHERE e.id = @effect_id;

-- name: EffectTransitionFirstActor :one
-- The actor of an effect's insert (its first audit row): who enqueued it.
SELECT actor FROM reckon_effect_transitions WHERE effect_id = @effect_id ORDER BY id LIMIT 1;
