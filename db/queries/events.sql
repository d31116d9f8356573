-- The event stream (migration 0027, docs/events.md): the view reckon_event_log, read below the
-- horizon — the oldest transaction still running. Readers run these in one REPEATABLE READ
-- transaction, so the horizon is the same for all of them.

-- name: EventsRead :many
-- The events after a position and below the horizon, in log order, that match the filter:
-- every type when all_types, else those named in types or of a category in categories; one
-- tenant's when tenant is set.
SELECT xid::text::bigint AS xid, seq, type, tenant_id, session_key, turn_id, effect_id, saga_id, run_id, payload, at
FROM reckon_event_log
WHERE (xid, seq) > ((@after_xid::bigint)::text::xid8, @after_seq::bigint)
  AND xid < pg_snapshot_xmin(pg_current_snapshot())
  AND (sqlc.narg(tenant)::text IS NULL OR tenant_id = sqlc.narg(tenant)::text)
  AND (@all_types::boolean OR type = ANY(@types::text[]) OR split_part(type, '.', 1) = ANY(@categories::text[]))
ORDER BY xid, seq
LIMIT @max_events;

-- name: EventsHorizon :one
-- The last position below the horizon (0, 0 when there is none), and whether events above it
-- have committed already: a reader that has seen everything below should look again soon.
WITH last AS (
    SELECT xid, seq FROM (
        (SELECT xid, seq FROM reckon_events WHERE xid < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY xid DESC, seq DESC LIMIT 1)
        UNION ALL
        (SELECT xid, id FROM reckon_effect_transitions WHERE xid IS NOT NULL AND xid < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY xid DESC, id DESC LIMIT 1)
    ) both_tables ORDER BY xid DESC, seq DESC LIMIT 1
)
SELECT coalesce((SELECT xid::text::bigint FROM last), 0)::bigint AS xid,
       coalesce((SELECT seq FROM last), 0)::bigint AS seq,
       (EXISTS (SELECT 1 FROM reckon_events WHERE xid >= pg_snapshot_xmin(pg_current_snapshot()))
        OR EXISTS (SELECT 1 FROM reckon_effect_transitions WHERE xid IS NOT NULL AND xid >= pg_snapshot_xmin(pg_current_snapshot())))::boolean AS held;

-- name: EventsDropped :one
-- The last position retention has dropped (0, 0 when none): a reader after an earlier one has
-- missed events.
SELECT coalesce((SELECT xid::text::bigint FROM reckon_events_dropped), 0)::bigint AS xid,
       coalesce((SELECT seq FROM reckon_events_dropped), 0)::bigint AS seq;
