-- Reads of many effects' evidence at once (effects.Client.Histories, Compensations, GetMany), for a
-- page of the operators' STUCK queue (cmd/server/internal/ops).

-- name: EffectTransitionListByEffects :many
-- The audit trails of effects, each oldest first: reckon_effect_transitions_effect_idx
-- (effect_id, id) of each partition.
SELECT * FROM reckon_effect_transitions WHERE effect_id = ANY (@effect_ids::uuid[]) ORDER BY effect_id, id;

-- name: EffectListCompensationsOf :many
-- The compensations of effects, each's newest first: reckon_effects_compensates_idx.
SELECT * FROM reckon_effects WHERE compensates_id = ANY (@ids::uuid[]) ORDER BY compensates_id, created_at DESC, id DESC;
