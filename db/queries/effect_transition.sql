-- name: EffectTransitionListByEffects :many
-- The audit trails of effects (one or a page of them), each oldest first:
-- reckon_effect_transitions_effect_idx (effect_id, id) of each partition.
SELECT * FROM reckon_effect_transitions WHERE effect_id = ANY (@effect_ids::uuid[]) ORDER BY effect_id, id;

-- name: EffectObservationInsert :exec
-- Records in the audit trail what a fenced-out writer saw (a late outcome) without changing the
-- effect: from_state and to_state are both the effect's current state.
INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, detail)
SELECT e.id, e.tenant_id, e.state, e.state, @actor::text, @reason::text, e.attempts, @detail
FROM reckon_effects e WHERE e.id = @effect_id;

-- name: EffectTransitionFirstActor :one
-- The actor of an effect's insert (its first audit row): who enqueued it.
SELECT actor FROM reckon_effect_transitions WHERE effect_id = @effect_id ORDER BY id LIMIT 1;
