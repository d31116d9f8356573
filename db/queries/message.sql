-- name: MessageInsert :one
-- Records an inbound message; nothing when the session already has a message with that id.
INSERT INTO reckon_messages (id, session_key, message_id, channel, content, sent_at, received_at)
VALUES (@id, @session_key, @message_id, @channel, @content, sqlc.narg('sent_at'), clock_timestamp())
ON CONFLICT (session_key, message_id) DO NOTHING
RETURNING *;

-- name: MessageGetByMessageID :one
SELECT * FROM reckon_messages WHERE session_key = @session_key AND message_id = @message_id;

-- name: MessageAssign :exec
UPDATE reckon_messages SET turn_id = @turn_id WHERE id = @id;

-- name: MessageMove :exec
-- Moves every message of one turn to another.
UPDATE reckon_messages SET turn_id = @to_turn_id WHERE turn_id = @from_turn_id;

-- name: MessageListByTurn :many
SELECT * FROM reckon_messages WHERE turn_id = @turn_id ORDER BY received_at, id;

-- name: MessageListPending :many
-- Messages of the session waiting in its accumulating turn.
SELECT m.* FROM reckon_messages m JOIN reckon_turns t ON t.id = m.turn_id
WHERE t.session_key = @session_key AND t.status = 'ACCUMULATING'
ORDER BY m.received_at, m.id;

-- name: MessageMoveByID :many
-- Moves the given messages from one turn to another; returns the ids of those it moved (the ones
-- that were in from_turn_id).
UPDATE reckon_messages SET turn_id = @to_turn_id
WHERE turn_id = @from_turn_id AND id = ANY(sqlc.arg(ids)::uuid[])
RETURNING id;
