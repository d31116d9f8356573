-- name: EffectTransitionListByEffect :many
-- The audit trail of one effect, oldest first.
SELECT * FROM reckon_effect_transitions WHERE effect_id = @effect_id ORDER BY id;
