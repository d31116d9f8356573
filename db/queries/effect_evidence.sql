-- Reads of many effects' evidence at once (effects.Client.Compensations; the histories are
-- EffectTransitionListByEffects), for a page of the operators' STUCK queue (cmd/server/internal/ops).

-- name: EffectListCompensationsOf :many
-- The compensations of effects, each's newest first: reckon_effects_compensates_idx.
SELECT * FROM reckon_effects WHERE compensates_id = ANY (@ids::uuid[]) ORDER BY compensates_id, created_at DESC, id DESC;
