-- name: OperatorInsert :one
-- Adds an operator. No row when an operator that is not revoked has the name.
INSERT INTO reckon_operators (id, name, role, tenants, prefix, token_sha256)
VALUES (@id, @name, @role, sqlc.narg(tenants)::text[], @prefix, @token_sha256)
ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING
RETURNING *;

-- name: OperatorList :many
SELECT * FROM reckon_operators ORDER BY created_at, id;

-- name: OperatorRevoke :one
-- Revokes the operator of this name that is not revoked yet. No row when there is none.
UPDATE reckon_operators SET revoked_at = now()
WHERE name = @name AND revoked_at IS NULL
RETURNING *;

-- name: OperatorAuthenticate :one
-- The operator, not revoked, whose token has this SHA-256.
SELECT * FROM reckon_operators WHERE token_sha256 = @token_sha256 AND revoked_at IS NULL;

-- name: OperatorSessionInsert :one
INSERT INTO reckon_operator_sessions (id_sha256, operator_id, csrf, expires_at)
VALUES (@id_sha256, @operator_id, @csrf, now() + make_interval(secs => sqlc.arg(ttl_seconds)::float8))
RETURNING expires_at;

-- name: OperatorSessionGet :one
-- The session with this id's SHA-256, if it has not expired and its operator is not revoked.
SELECT sqlc.embed(o), s.csrf, s.expires_at
FROM reckon_operator_sessions s
JOIN reckon_operators o ON o.id = s.operator_id
WHERE s.id_sha256 = @id_sha256 AND s.expires_at > now() AND o.revoked_at IS NULL;

-- name: OperatorSessionDelete :exec
DELETE FROM reckon_operator_sessions WHERE id_sha256 = @id_sha256;

-- name: OperatorSessionDeleteByOperator :execrows
DELETE FROM reckon_operator_sessions WHERE operator_id = @operator_id;

-- name: OperatorSessionPruneExpired :execrows
-- Deletes up to max_rows sessions expired at now (NULL: the database's now), oldest expiry first
-- (through the expires_at index): at sign-in, and in retention runs with the run's time.
DELETE FROM reckon_operator_sessions
WHERE id_sha256 IN (
    SELECT id_sha256 FROM reckon_operator_sessions
    WHERE expires_at <= coalesce(sqlc.narg(now)::timestamptz, now())
    ORDER BY expires_at
    LIMIT sqlc.arg(max_rows)::int
    FOR UPDATE SKIP LOCKED
);
