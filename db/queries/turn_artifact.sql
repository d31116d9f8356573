-- name: TurnArtifactGet :one
-- An artifact of the turn group (migration 0029), locked for the lookup that may report it reused
-- or invalidated. Package turns runs these queries on the session mutex's connection.
SELECT * FROM reckon_turn_artifacts WHERE turn_group = @turn_group AND name = @name FOR UPDATE;

-- name: TurnArtifactListByGroup :many
SELECT * FROM reckon_turn_artifacts WHERE turn_group = @turn_group ORDER BY name;

-- name: TurnArtifactUpsert :exec
-- Saves an artifact of the turn group, replacing the one of the same name. (saved_at comes from the
-- VALUES: Citus refuses now() in DO UPDATE SET.)
INSERT INTO reckon_turn_artifacts (
    turn_group, name, data, input_fingerprint, dependency_fingerprint, policy, turn_id, tenant_id, session_key, saved_at
) VALUES (
    @turn_group, @name, @data, @input_fingerprint, @dependency_fingerprint, @policy, @turn_id, @tenant_id, @session_key, now()
)
ON CONFLICT (turn_group, name) DO UPDATE SET
    data = excluded.data,
    input_fingerprint = excluded.input_fingerprint,
    dependency_fingerprint = excluded.dependency_fingerprint,
    policy = excluded.policy,
    turn_id = excluded.turn_id,
    tenant_id = excluded.tenant_id,
    session_key = excluded.session_key,
    saved_at = excluded.saved_at;

-- name: TurnArtifactEmit :exec
-- Writes an artifact event (artifact.reused, artifact.invalidated) of a turn to the event stream.
SELECT reckon_emit(sqlc.arg(type)::text, sqlc.arg(tenant_id)::text, sqlc.arg(session_key)::text,
    sqlc.arg(turn_id)::uuid, NULL, NULL, NULL, sqlc.arg(payload)::jsonb);
