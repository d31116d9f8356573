-- name: StatsEnsure :exec
-- Makes the row of a part of the shared statistics, not computed yet, if there is none.
INSERT INTO reckon_stats (part) VALUES (@part::text) ON CONFLICT (part) DO NOTHING;

-- name: StatsClaim :one
-- Claims, in the caller's transaction, the computation of a part: the row's computed_at becomes
-- this transaction's start when the part was last computed at least interval_ms ago and no other
-- transaction holds the row (a computation in progress is skipped, not waited for). No row: not
-- due, or another reactor is computing it. The row stays locked until the caller's transaction
-- ends; a rollback leaves it as it was, due for the next claimant.
WITH due AS (
    SELECT part FROM reckon_stats
    WHERE part = @part::text
      AND computed_at <= now() - make_interval(0, 0, 0, 0, 0, 0, sqlc.arg(interval_ms)::bigint::float8 / 1000)
    FOR UPDATE SKIP LOCKED
)
UPDATE reckon_stats s SET computed_at = now(), computed_by = @computed_by::text
FROM due WHERE s.part = due.part
RETURNING s.computed_at;

-- name: StatsBound :exec
-- Bounds the caller's computing transaction: a statement running longer than timeout (e.g. '15000ms'),
-- or the transaction left idle that long (its process hung or its host vanished), ends it and
-- frees the claimed row for another reactor.
SELECT set_config('statement_timeout', @timeout::text, true),
       set_config('idle_in_transaction_session_timeout', @timeout::text, true);

-- name: StatsSet :exec
-- Stores a part's value, in the transaction that claimed it.
UPDATE reckon_stats SET value = @value WHERE part = @part::text;

-- name: StatsList :many
-- The stored parts named, whether each was ever computed and how long ago by the database's clock:
-- what every process's collectors report.
SELECT part, value, computed_by, isfinite(computed_at)::boolean AS computed,
       (CASE WHEN isfinite(computed_at) THEN extract(epoch FROM now() - computed_at) ELSE 0 END)::float8 AS age_seconds
FROM reckon_stats
WHERE part = ANY (@parts::text[]);

-- name: StatsEffectsUnresolved :many
-- The effects part: how many effects are PENDING, UNKNOWN and STUCK per connector and, for PENDING,
-- the age in seconds (by created_at) of the oldest not awaiting a callback (queued, in flight or
-- waiting for a retry: an effect accepted upstream has a correlation id and its own deadline); 0
-- when none. One pass over the partial index of unresolved effects (reckon_effects_unresolved_idx)
-- and their rows: measured on 1M effects with 3,100 unresolved, 7 ms; with 203,100 unresolved (a
-- backlog), 190 ms (docs/design.md, "Shared statistics").
-- An effect awaiting its confirmation (0024_confirmations) waits for a person, not for the
-- reactors: it is counted apart, with the age of the oldest, and left out of the queue lag.
SELECT state, connector, count(*)::bigint AS count,
       coalesce(extract(epoch FROM now() - min(created_at) FILTER (
           WHERE state = 'PENDING' AND correlation_id IS NULL AND confirmation IS DISTINCT FROM 'AWAITING')), 0)::float8
           AS oldest_pending_seconds,
       count(*) FILTER (WHERE state = 'PENDING' AND confirmation = 'AWAITING')::bigint AS awaiting_confirmation,
       coalesce(extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'PENDING' AND confirmation = 'AWAITING')), 0)::float8
           AS oldest_awaiting_confirmation_seconds
FROM reckon_effects
WHERE state IN ('PENDING', 'UNKNOWN', 'STUCK')
GROUP BY state, connector;
