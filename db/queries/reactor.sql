-- name: ReactorRegister :one
-- Registers a started reactor, which holds its lock. A reactor restarted under the same id starts
-- afresh: its predecessor's jobs were taken over before (see RiverJobTakeOver).
-- (The times come from the VALUES, not from now() in DO UPDATE SET, which Citus refuses.)
INSERT INTO reckon_reactors (id, queue, started_at, heartbeat_at) VALUES (@id, @queue, now(), now())
ON CONFLICT (id) DO UPDATE
SET queue = excluded.queue, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
    dead_at = NULL, taken_over_by = NULL, jobs_taken_over = 0
RETURNING *;

-- name: ReactorHeartbeat :one
-- The reactor's sign of life, written on its lock's connection; returns whether another reactor
-- took it for dead meanwhile (dead_at set). No row: the registration is gone (register again).
UPDATE reckon_reactors SET heartbeat_at = now() WHERE id = @id RETURNING dead_at;

-- name: ReactorUnregister :exec
-- A reactor that stopped cleanly, with no job left running, leaves.
DELETE FROM reckon_reactors WHERE id = @id;

-- name: ReactorListRunningJobOwners :many
-- The registered reactors among owners (RiverJobRunningOwners), other than the caller: the
-- reactors whose liveness the caller checks.
-- silent: no heartbeat for silent_ms (its host may have vanished, leaving its connection, and so
-- its lock, open until TCP keepalives notice).
SELECT r.id, r.heartbeat_at,
       (r.heartbeat_at < now() - make_interval(0, 0, 0, 0, 0, 0, sqlc.arg(silent_ms)::integer::float8 / 1000))::boolean AS silent
FROM reckon_reactors r
WHERE r.id <> @self::text AND r.id = ANY (@owners::text[])
ORDER BY r.id;

-- name: ReactorListIDs :many
-- The ids of the registered reactors.
SELECT id FROM reckon_reactors;

-- name: ReactorMarkDead :one
-- Records that the caller found the reactor dead and took its jobs over. The first finder's time
-- and name stay; the count adds up. (reckon_pick, not coalesce(dead_at, now()), which Citus refuses.)
UPDATE reckon_reactors
SET dead_at = reckon_pick(dead_at IS NULL, now(), dead_at),
    taken_over_by = coalesce(taken_over_by, @taken_over_by::text),
    jobs_taken_over = jobs_taken_over + @jobs::integer
WHERE id = @id
RETURNING heartbeat_at, dead_at;

-- name: ReactorListForgotten :many
-- The reactors not heard from for a day (long dead: a live one beats every second), which
-- ReactorDeleteForgotten forgets once their lock is found free (a reactor restarted under the same
-- id holds it). The lock is tried apart, not in the DELETE's WHERE: an advisory lock must be tried
-- where the reactors hold theirs, and Citus would run a DELETE's WHERE on the node of the table.
SELECT id FROM reckon_reactors WHERE heartbeat_at < now() - interval '1 day' ORDER BY id;

-- name: ReactorDeleteForgotten :execrows
DELETE FROM reckon_reactors WHERE id = @id AND heartbeat_at < now() - interval '1 day';

-- name: ReactorEndSilentConnection :one
-- Ends the server backend that holds a silent reactor's lock: a reactor that stopped beating for
-- that long is gone (its host vanished) or cut off, and either way must not keep its jobs. Postgres
-- frees the lock with the backend; a live reactor finds itself taken for dead when it reconnects
-- and stops. Returns how many backends were ended (0 or 1).
SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid))::integer AS ended
FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.classid::bigint = (sqlc.arg(namespace)::integer::bigint & 4294967295)
  AND l.objid::bigint = (hashtext(sqlc.arg(id)::text)::bigint & 4294967295)
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.pid <> pg_backend_pid();

-- name: ReactorResignLeadership :execrows
-- Ends the River leadership of a reactor found dead, as River's own resignation does, so that a
-- live reactor is elected at once instead of when the dead one's lease expires. The caller sends
-- River's notification (ReactorNotifyResigned) in the same transaction when a row was deleted.
DELETE FROM river_leader WHERE leader_id = @leader_id::text;

-- name: ReactorNotifyResigned :exec
-- River's resignation notification for a leader (at commit). A statement of its own, as
-- LimitNotify is.
SELECT pg_notify(current_schema() || '.river_leadership',
                 json_build_object('leader_id', @leader_id::text, 'action', 'resigned')::text);

-- name: ReactorCountLive :one
-- The reactors of the queue that live: registered, not found dead by another, and with a heartbeat
-- at most stale_ms old (reckon_reactors_live, read at scrape time).
SELECT count(*)::integer AS live
FROM reckon_reactors
WHERE queue = @queue::text AND dead_at IS NULL
  AND heartbeat_at >= now() - make_interval(0, 0, 0, 0, 0, 0, sqlc.arg(stale_ms)::integer::float8 / 1000);
