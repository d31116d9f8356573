-- name: EffectInsert :one
-- Inserts a PENDING effect. The transition trigger records the insert in reckon_effect_transitions
-- with the given actor and reason.
INSERT INTO reckon_effects (
    id, tenant_id, connector, args, idempotency_key, business_key, policy, tags, max_attempts,
    deadline_at, run_id, turn_id, turn_group, transition_actor, transition_reason, transition_detail
) VALUES (
    @id, @tenant_id, @connector, @args, @idempotency_key, @business_key, @policy, @tags, @max_attempts,
    @deadline_at, @run_id, @turn_id, @turn_group, @actor::text, @reason::text, @detail
)
RETURNING *;

-- name: EffectGetByID :one
SELECT * FROM reckon_effects WHERE id = @id;

-- name: EffectGetByIdempotencyKey :one
SELECT * FROM reckon_effects WHERE tenant_id = @tenant_id AND idempotency_key = @idempotency_key;

-- name: EffectTransition :one
-- Moves an effect from one state to another, naming who and why. Returns no row when the effect is
-- no longer in from_state (someone else moved it first); the trigger refuses illegal transitions.
UPDATE reckon_effects
SET state = @to_state,
    transition_actor = @actor::text,
    transition_reason = @reason::text,
    transition_detail = @detail
WHERE id = @id AND state = @from_state
RETURNING *;
