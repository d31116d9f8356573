-- name: TurnInsert :one
-- Opens a turn of the session with the next sequence number. The number is read in a CTE, not in
-- a subquery within the VALUES, which Citus refuses (and a plain INSERT … SELECT from the same
-- single-shard table it sends to the worker as invalid SQL).
WITH next AS MATERIALIZED (
    SELECT coalesce(max(t.seq), 0) + 1 AS seq FROM reckon_turns t WHERE t.session_key = @session_key
)
INSERT INTO reckon_turns (
    id, session_key, seq, turn_group, status, channel, message_ids, first_at, last_at, window_ms, attempt, aggregation_reason
)
SELECT
    @id, @session_key, next.seq,
    @turn_group, 'ACCUMULATING', @channel, sqlc.arg(message_ids)::uuid[], @first_at, @last_at, @window_ms, @attempt,
    sqlc.narg('aggregation_reason')
FROM next
RETURNING *;

-- name: TurnGet :one
SELECT * FROM reckon_turns WHERE id = @id;

-- name: TurnGetAccumulating :one
SELECT * FROM reckon_turns WHERE session_key = @session_key AND status = 'ACCUMULATING' FOR UPDATE;

-- name: TurnListInFlight :many
-- The session's turns that are PROCESSING or COMMITTING. Called under the session mutex, these are
-- abandoned: their holder died or failed.
SELECT * FROM reckon_turns WHERE session_key = @session_key AND status IN ('PROCESSING', 'COMMITTING') FOR UPDATE;

-- name: TurnListBySession :many
SELECT * FROM reckon_turns WHERE session_key = @session_key ORDER BY seq;

-- name: TurnAddMessages :one
-- Adds messages to a turn (sorted, without duplicates) and widens its first/last message times.
UPDATE reckon_turns SET
    message_ids = (SELECT array_agg(DISTINCT m ORDER BY m) FROM unnest(message_ids || sqlc.arg(message_ids)::uuid[]) m),
    first_at = least(first_at, @first_at),
    last_at = greatest(last_at, @last_at),
    window_ms = @window_ms
WHERE id = @id
RETURNING *;

-- name: TurnInherit :exec
-- Makes a turn continue the turn group (and count the attempts) of the turn it replaces.
UPDATE reckon_turns SET turn_group = @turn_group, attempt = greatest(attempt, @attempt) WHERE id = @id;

-- name: TurnDueAt :one
-- When the turn's aggregation window closes, and the database's clock now.
SELECT (last_at + make_interval(secs => window_ms::float8 / 1000))::timestamptz AS due_at,
       clock_timestamp()::timestamptz AS now
FROM reckon_turns WHERE id = @id;

-- name: TurnStart :one
-- The turn's stamps are clock_timestamp() as a subquery, computed once for the statement (on one
-- row, as the function was): Citus computes it on the coordinator, where it refuses a VOLATILE
-- function in an UPDATE. pg_backend_pid(), STABLE, it computes on the coordinator too: the
-- connection that holds the session mutex.
UPDATE reckon_turns SET
    status = 'PROCESSING', started_at = (SELECT clock_timestamp()), holder = @holder, holder_pid = pg_backend_pid(),
    beat_key = @beat_key, aggregation_reason = coalesce(aggregation_reason, @aggregation_reason)
WHERE id = @id AND status = 'ACCUMULATING'
RETURNING *;

-- name: TurnSetStatus :one
-- Moves a turn from one in-flight status to another (PROCESSING ⇄ COMMITTING).
UPDATE reckon_turns SET status = @status WHERE id = @id AND status = @from_status RETURNING *;

-- name: TurnComplete :one
-- completed_at: as TurnStart's started_at.
UPDATE reckon_turns SET status = 'COMPLETE', completed_at = (SELECT clock_timestamp()), commit_point_reached = true
WHERE id = @id AND status = 'COMMITTING'
RETURNING *;

-- name: TurnEnd :exec
-- Ends an in-flight turn without committing it: SUPERSEDED (a later turn takes its messages) or
-- FAILED. completed_at: as TurnStart's started_at.
UPDATE reckon_turns SET status = @status, status_reason = @status_reason, superseded_by = sqlc.narg('superseded_by'),
    completed_at = (SELECT clock_timestamp())
WHERE id = @id AND status IN ('PROCESSING', 'COMMITTING');

-- name: TurnDelete :exec
-- Deletes an accumulating turn whose messages another turn absorbed.
DELETE FROM reckon_turns WHERE id = @id AND status = 'ACCUMULATING';

-- name: TurnSetBeatKey :exec
UPDATE reckon_turns SET beat_key = @beat_key WHERE id = @id;

-- name: TurnRecordSideEffect :one
UPDATE reckon_turns SET side_effects_executed = side_effects_executed + 1,
    commit_point_reached = commit_point_reached OR sqlc.arg(commit_point)::boolean
WHERE id = @id
RETURNING *;

-- name: TurnReachCommitPoint :one
UPDATE reckon_turns SET commit_point_reached = true WHERE id = @id RETURNING *;

-- name: TurnHolders :many
-- Advisory locks in the session-mutex namespace (held and awaited), with the in-flight turn of
-- the holding connection, if any.
SELECT l.pid::integer AS pid, l.granted, l.objid::bigint AS lock_key,
       t.id AS turn_id, t.session_key, t.status, t.holder, t.started_at
FROM pg_locks l
LEFT JOIN reckon_turns t
    ON t.holder_pid = l.pid AND t.status IN ('PROCESSING', 'COMMITTING') AND l.granted
    AND (hashtext(t.session_key)::bigint & 4294967295) = l.objid::bigint
WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.classid::bigint = (sqlc.arg(namespace)::integer::bigint & 4294967295)
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.granted DESC, l.pid;

-- name: TurnDecisionInsert :one
INSERT INTO reckon_turn_decisions (turn_id, session_key, action, reason, decider, message_ids)
VALUES (@turn_id, @session_key, @action, @reason, @decider, sqlc.arg(message_ids)::uuid[])
RETURNING *;

-- name: TurnDecisionListByTurn :many
SELECT * FROM reckon_turn_decisions WHERE turn_id = @turn_id ORDER BY id;

-- name: TurnListAbandonedSessions :many
-- Sessions with a PROCESSING or COMMITTING turn whose holder does not hold the session mutex any
-- more: it died (its connection closed) or its handler or commit failed.
SELECT DISTINCT t.session_key FROM reckon_turns t
WHERE t.status IN ('PROCESSING', 'COMMITTING')
  AND NOT EXISTS (
      SELECT 1 FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.pid = t.holder_pid
        AND l.classid::bigint = (sqlc.arg(namespace)::integer::bigint & 4294967295)
        AND l.objid::bigint = (hashtext(t.session_key)::bigint & 4294967295)
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  )
LIMIT sqlc.arg(max_sessions);

-- name: TurnRemoveMessages :one
-- Removes messages that moved away from a turn's message ids and narrows its first/last message
-- times to the messages it keeps.
UPDATE reckon_turns t SET
    message_ids = coalesce((SELECT array_agg(m ORDER BY m) FROM unnest(t.message_ids) m WHERE m <> ALL(sqlc.arg(message_ids)::uuid[])), '{}'),
    first_at = coalesce((SELECT min(received_at) FROM reckon_messages WHERE turn_id = t.id), t.first_at),
    last_at = coalesce((SELECT max(received_at) FROM reckon_messages WHERE turn_id = t.id), t.last_at)
WHERE t.id = @id
RETURNING *;
