-- Retention (package retention, docs/operations.md "Retention"): the deletion of settled work past
-- its retention, in batches, and what `server retention status` reads.
--
-- Every cutoff comes from the caller's clock (now), never from the database's: a test runs
-- retention "40 days later" by moving its clock. A tenant's cutoff is now minus its
-- reckon_retention_policies.effect_retention_seconds, else minus global_seconds. scan_before is the
-- newest cutoff of all tenants (now minus the shortest retention): every index scan is bounded by
-- it and each row is then held to its own tenant's cutoff. after is a cursor: the batches of one run
-- move forward through the index instead of reading again the rows they kept.
--
-- The pruning queries lock their candidates FOR UPDATE SKIP LOCKED: a row another transaction holds
-- (an enqueue into a run, a compensation being inserted, a saga advancing) is left for the next run.
-- The *Count queries are the dry run: the same predicates, counted, except that they count what the
-- sagas and turn groups removed earlier in the same run would free (a real run removes those first).

-- name: RetentionPolicyShortest :one
-- The shortest per-tenant effect retention, in seconds; 0 without policies.
SELECT coalesce(min(effect_retention_seconds), 0)::bigint AS seconds FROM reckon_retention_policies;

-- name: RetentionPolicyList :many
SELECT * FROM reckon_retention_policies ORDER BY tenant_id;

-- name: RetentionPolicySet :one
-- Sets the tenant's effect retention (inserted or replaced).
INSERT INTO reckon_retention_policies AS p (tenant_id, effect_retention_seconds, updated_at)
VALUES (@tenant_id, @effect_retention_seconds, now())
ON CONFLICT (tenant_id) DO UPDATE
SET effect_retention_seconds = excluded.effect_retention_seconds, updated_at = excluded.updated_at
RETURNING *;

-- name: RetentionPolicyDelete :execrows
DELETE FROM reckon_retention_policies WHERE tenant_id = @tenant_id;

-- name: RetentionSagaPrune :one
-- Deletes up to max_rows finished sagas (COMPLETED, COMPENSATED) past their tenant's cutoff; their
-- steps go by ON DELETE CASCADE (counted here first), their transitions stay (history). The
-- effects of their steps are free to go afterwards (RetentionEffectPrune).
WITH candidates AS (
    SELECT s.id, s.updated_at
    FROM reckon_sagas s
    LEFT JOIN reckon_retention_policies p ON p.tenant_id = s.tenant_id
    WHERE s.state IN ('COMPLETED', 'COMPENSATED')
      AND s.updated_at < sqlc.arg(scan_before)::timestamptz
      AND s.updated_at >= sqlc.arg(after)::timestamptz
      AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
    ORDER BY s.updated_at
    LIMIT sqlc.arg(max_rows)::integer
    FOR UPDATE OF s SKIP LOCKED
),
steps AS (
    SELECT count(*) AS n FROM reckon_saga_steps st WHERE st.saga_id IN (SELECT c.id FROM candidates c)
),
deleted AS (
    DELETE FROM reckon_sagas s WHERE s.id IN (SELECT c.id FROM candidates c) RETURNING s.id
)
SELECT (SELECT count(*) FROM candidates)::bigint AS candidates,
       (SELECT count(*) FROM deleted)::bigint AS sagas,
       (SELECT n FROM steps)::bigint AS steps,
       coalesce((SELECT max(c.updated_at) FROM candidates c), sqlc.arg(after)::timestamptz)::timestamptz AS last_at;

-- name: RetentionSagaCount :one
SELECT count(*)::bigint AS sagas,
       coalesce(sum((SELECT count(*) FROM reckon_saga_steps st WHERE st.saga_id = s.id)), 0)::bigint AS steps
FROM reckon_sagas s
LEFT JOIN reckon_retention_policies p ON p.tenant_id = s.tenant_id
WHERE s.state IN ('COMPLETED', 'COMPENSATED')
  AND s.updated_at < sqlc.arg(scan_before)::timestamptz
  AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint));

-- name: RetentionTurnGroupCandidates :many
-- Finished turns (COMPLETE, SUPERSEDED, FAILED), oldest first, whose whole turn group may go: every
-- turn of the group is finished since before its tenant's cutoff (the tenant is the session key's
-- first part), and no turn of another group was superseded by one of them (superseded_by refers to
-- turns). Several rows may name one group. created_at bounds the scan: a turn finishes after it is
-- created.
SELECT t.turn_group, t.created_at
FROM reckon_turns t
WHERE t.status IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
  AND t.created_at < sqlc.arg(scan_before)::timestamptz
  AND t.created_at >= sqlc.arg(after)::timestamptz
  AND NOT EXISTS (
      SELECT 1 FROM reckon_turns o
      LEFT JOIN reckon_retention_policies p ON p.tenant_id = split_part(o.session_key, ':', 1)
      WHERE o.turn_group = t.turn_group
        AND (o.status NOT IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
             OR coalesce(o.completed_at, o.created_at) >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
             OR EXISTS (SELECT 1 FROM reckon_turns x WHERE x.superseded_by = o.id AND x.turn_group <> o.turn_group))
  )
ORDER BY t.created_at
LIMIT sqlc.arg(max_rows)::integer;

-- name: RetentionTurnLock :many
-- Locks the turns of the given groups, skipping those another transaction holds (their group then
-- stays: RetentionTurnGroupDelete deletes only groups whose every turn is locked).
SELECT t.id FROM reckon_turns t WHERE t.turn_group = ANY(sqlc.arg(groups)::uuid[])
FOR UPDATE SKIP LOCKED;

-- name: RetentionTurnGroupDelete :one
-- Deletes the given turn groups that still qualify (checked again under the locks of
-- RetentionTurnLock, whose ids are locked): their decisions, their messages, their artifacts and
-- their turns, in one statement (a turn's superseded_by may name another turn of its group).
WITH doomed_groups AS (
    SELECT g.turn_group
    FROM unnest(sqlc.arg(groups)::uuid[]) AS g(turn_group)
    WHERE NOT EXISTS (
        SELECT 1 FROM reckon_turns o
        LEFT JOIN reckon_retention_policies p ON p.tenant_id = split_part(o.session_key, ':', 1)
        WHERE o.turn_group = g.turn_group
          AND (o.id <> ALL(sqlc.arg(locked)::uuid[])
               OR o.status NOT IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
               OR coalesce(o.completed_at, o.created_at) >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
               OR EXISTS (SELECT 1 FROM reckon_turns x WHERE x.superseded_by = o.id AND x.turn_group <> o.turn_group))
    )
),
doomed AS (
    SELECT t.id FROM reckon_turns t WHERE t.turn_group IN (SELECT d.turn_group FROM doomed_groups d)
),
decisions AS (
    DELETE FROM reckon_turn_decisions d WHERE d.turn_id IN (SELECT x.id FROM doomed x) RETURNING d.id
),
messages AS (
    DELETE FROM reckon_messages m WHERE m.turn_id IN (SELECT x.id FROM doomed x) RETURNING m.id
),
artifacts AS ( -- not counted: a group's artifacts are a cache of its turns' work (migration 0029)
    DELETE FROM reckon_turn_artifacts a WHERE a.turn_group IN (SELECT d.turn_group FROM doomed_groups d)
),
turns AS (
    DELETE FROM reckon_turns t WHERE t.id IN (SELECT x.id FROM doomed x) RETURNING t.id
)
SELECT (SELECT count(*) FROM doomed_groups)::bigint AS groups,
       (SELECT count(*) FROM turns)::bigint AS turns,
       (SELECT count(*) FROM messages)::bigint AS messages,
       (SELECT count(*) FROM decisions)::bigint AS decisions;

-- name: RetentionTurnGroupCount :one
WITH groups AS (
    SELECT DISTINCT t.turn_group
    FROM reckon_turns t
    WHERE t.status IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
      AND t.created_at < sqlc.arg(scan_before)::timestamptz
      AND NOT EXISTS (
          SELECT 1 FROM reckon_turns o
          LEFT JOIN reckon_retention_policies p ON p.tenant_id = split_part(o.session_key, ':', 1)
          WHERE o.turn_group = t.turn_group
            AND (o.status NOT IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
                 OR coalesce(o.completed_at, o.created_at) >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
                 OR EXISTS (SELECT 1 FROM reckon_turns x WHERE x.superseded_by = o.id AND x.turn_group <> o.turn_group))
      )
),
turns AS (
    SELECT t.id FROM reckon_turns t WHERE t.turn_group IN (SELECT g.turn_group FROM groups g)
)
SELECT (SELECT count(*) FROM turns)::bigint AS turns,
       (SELECT count(*) FROM reckon_messages m WHERE m.turn_id IN (SELECT x.id FROM turns x))::bigint AS messages,
       (SELECT count(*) FROM reckon_turn_decisions d WHERE d.turn_id IN (SELECT x.id FROM turns x))::bigint AS decisions;

-- name: RetentionRunPrune :one
-- Deletes up to max_rows runs past their tenant's cutoff together with all their effects, and
-- leaves a tombstone of each effect when dedup_seconds > 0. A run goes only as a whole: every
-- effect of it is CONFIRMED or FAILED since before the cutoff, is no saga's step or compensation,
-- belongs to no turn group that still has a turn, and no effect outside the run compensates one of
-- its effects (a compensation carries the run of the effect it undoes). Deleting some effects of a
-- run would change its guardrail counts.
WITH runs AS (
    SELECT r.tenant_id, r.id, r.updated_at
    FROM reckon_runs r
    LEFT JOIN reckon_retention_policies p ON p.tenant_id = r.tenant_id
    WHERE r.updated_at < sqlc.arg(scan_before)::timestamptz
      AND r.updated_at >= sqlc.arg(after)::timestamptz
      AND r.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
      -- Each condition on the run's effects is an anti-join of its own, by index: OR-ed together
      -- they would make Postgres hash whole tables (saga steps, turns) at every batch.
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id
            AND (e.state NOT IN ('CONFIRMED', 'FAILED') OR e.updated_at >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e JOIN reckon_saga_steps st ON st.effect_id = e.id
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id)
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e JOIN reckon_saga_steps st ON st.compensation_effect_id = e.id
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id)
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e
          JOIN reckon_turns t ON t.turn_group = (CASE WHEN e.turn_group ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN e.turn_group END)::uuid
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id)
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e JOIN reckon_effects c ON c.compensates_id = e.id
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id
            AND (c.tenant_id <> r.tenant_id OR c.run_id IS DISTINCT FROM r.id))
    ORDER BY r.updated_at
    LIMIT sqlc.arg(max_rows)::integer
    FOR UPDATE OF r SKIP LOCKED
),
doomed AS (
    SELECT e.id, e.tenant_id, e.idempotency_key, e.state, e.updated_at
    FROM reckon_effects e
    JOIN runs ON e.tenant_id = runs.tenant_id AND e.run_id = runs.id
),
tombstones AS (
    INSERT INTO reckon_effect_tombstones AS tb (tenant_id, idempotency_key, effect_id, state, settled_at, pruned_at, expires_at)
    SELECT d.tenant_id, d.idempotency_key, d.id, d.state, d.updated_at, sqlc.arg(now)::timestamptz,
           d.updated_at + make_interval(secs => sqlc.arg(dedup_seconds)::bigint)
    FROM doomed d
    WHERE sqlc.arg(dedup_seconds)::bigint > 0
      AND d.updated_at + make_interval(secs => sqlc.arg(dedup_seconds)::bigint) > sqlc.arg(now)::timestamptz
    ON CONFLICT (tenant_id, idempotency_key) DO UPDATE
    SET effect_id = excluded.effect_id, state = excluded.state, settled_at = excluded.settled_at,
        pruned_at = excluded.pruned_at, expires_at = excluded.expires_at
    WHERE excluded.settled_at >= tb.settled_at
    RETURNING tb.effect_id
),
deleted_effects AS (
    DELETE FROM reckon_effects e WHERE e.id IN (SELECT d.id FROM doomed d) RETURNING e.id
),
deleted_runs AS (
    DELETE FROM reckon_runs r USING runs WHERE r.tenant_id = runs.tenant_id AND r.id = runs.id RETURNING r.id
)
SELECT (SELECT count(*) FROM runs)::bigint AS candidates,
       (SELECT count(*) FROM deleted_runs)::bigint AS runs,
       (SELECT count(*) FROM deleted_effects)::bigint AS effects,
       (SELECT count(*) FROM tombstones)::bigint AS tombstones,
       coalesce((SELECT max(runs.updated_at) FROM runs), sqlc.arg(after)::timestamptz)::timestamptz AS last_at;

-- name: RetentionRunCount :one
-- RetentionRunPrune's runs and effects, counted; a saga step or turn group that the same run removes
-- first does not hold an effect.
WITH runs AS (
    SELECT r.tenant_id, r.id
    FROM reckon_runs r
    LEFT JOIN reckon_retention_policies p ON p.tenant_id = r.tenant_id
    WHERE r.updated_at < sqlc.arg(scan_before)::timestamptz
      AND r.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id
            AND (e.state NOT IN ('CONFIRMED', 'FAILED') OR e.updated_at >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id
            AND (EXISTS (SELECT 1 FROM reckon_saga_steps st JOIN reckon_sagas s ON s.id = st.saga_id
          LEFT JOIN reckon_retention_policies ps ON ps.tenant_id = s.tenant_id
          WHERE st.effect_id = e.id AND NOT (s.state IN ('COMPLETED', 'COMPENSATED') AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(ps.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
                 OR EXISTS (SELECT 1 FROM reckon_saga_steps st JOIN reckon_sagas s ON s.id = st.saga_id
          LEFT JOIN reckon_retention_policies ps ON ps.tenant_id = s.tenant_id
          WHERE st.compensation_effect_id = e.id AND NOT (s.state IN ('COMPLETED', 'COMPENSATED') AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(ps.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
                 OR EXISTS (SELECT 1 FROM reckon_turns o
          LEFT JOIN reckon_retention_policies po ON po.tenant_id = split_part(o.session_key, ':', 1)
          WHERE o.turn_group = (CASE WHEN e.turn_group ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN e.turn_group END)::uuid
            AND (o.status NOT IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
                 OR coalesce(o.completed_at, o.created_at) >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(po.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
                 OR EXISTS (SELECT 1 FROM reckon_turns x WHERE x.superseded_by = o.id AND x.turn_group <> o.turn_group)))))
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects e JOIN reckon_effects c ON c.compensates_id = e.id
          WHERE e.tenant_id = r.tenant_id AND e.run_id = r.id
            AND (c.tenant_id <> r.tenant_id OR c.run_id IS DISTINCT FROM r.id))
)
SELECT (SELECT count(*) FROM runs)::bigint AS runs,
       (SELECT count(*) FROM reckon_effects e JOIN runs ON e.tenant_id = runs.tenant_id AND e.run_id = runs.id)::bigint AS effects;

-- name: RetentionEffectPrune :one
-- Deletes up to max_rows settled effects (CONFIRMED, FAILED) past their tenant's cutoff together
-- with their compensations, and leaves a tombstone of each when dedup_seconds > 0. An effect goes
-- when it is no compensation itself (it goes with the effect it undoes), is not in a run that has a
-- reckon_runs row (RetentionRunPrune), is no saga's step or compensation, belongs to no turn group
-- that still has a turn (reckon_effects.turn_group is text, the turns' uuid: a text that is no uuid
-- belongs to none), and each of its compensations is settled since before the cutoff, has no
-- compensation of its own and is no saga's compensation.
WITH candidates AS (
    SELECT e.id, e.updated_at
    FROM reckon_effects e
    LEFT JOIN reckon_retention_policies p ON p.tenant_id = e.tenant_id
    WHERE e.state IN ('CONFIRMED', 'FAILED')
      AND e.updated_at < sqlc.arg(scan_before)::timestamptz
      AND e.updated_at >= sqlc.arg(after)::timestamptz
      AND e.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
      AND e.compensates_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM reckon_runs r WHERE r.tenant_id = e.tenant_id AND r.id = e.run_id)
      AND NOT EXISTS (SELECT 1 FROM reckon_saga_steps st WHERE st.effect_id = e.id)
      AND NOT EXISTS (SELECT 1 FROM reckon_saga_steps st WHERE st.compensation_effect_id = e.id)
      AND NOT EXISTS (SELECT 1 FROM reckon_turns t
                      WHERE t.turn_group = (CASE WHEN e.turn_group ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN e.turn_group END)::uuid)
      -- Each condition on the compensations is an anti-join of its own, by index (see
      -- RetentionRunPrune).
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects c
          WHERE c.compensates_id = e.id
            AND (c.state NOT IN ('CONFIRMED', 'FAILED') OR c.updated_at >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
      AND NOT EXISTS (SELECT 1 FROM reckon_effects c JOIN reckon_effects cc ON cc.compensates_id = c.id WHERE c.compensates_id = e.id)
      AND NOT EXISTS (SELECT 1 FROM reckon_effects c JOIN reckon_saga_steps st ON st.effect_id = c.id WHERE c.compensates_id = e.id)
      AND NOT EXISTS (SELECT 1 FROM reckon_effects c JOIN reckon_saga_steps st ON st.compensation_effect_id = c.id WHERE c.compensates_id = e.id)
    ORDER BY e.updated_at
    LIMIT sqlc.arg(max_rows)::integer
    FOR UPDATE OF e SKIP LOCKED
),
doomed AS (
    SELECT e.id, e.tenant_id, e.idempotency_key, e.state, e.updated_at
    FROM reckon_effects e JOIN candidates c ON e.id = c.id
    UNION ALL
    SELECT e.id, e.tenant_id, e.idempotency_key, e.state, e.updated_at
    FROM reckon_effects e JOIN candidates c ON e.compensates_id = c.id
),
tombstones AS (
    INSERT INTO reckon_effect_tombstones AS tb (tenant_id, idempotency_key, effect_id, state, settled_at, pruned_at, expires_at)
    SELECT d.tenant_id, d.idempotency_key, d.id, d.state, d.updated_at, sqlc.arg(now)::timestamptz,
           d.updated_at + make_interval(secs => sqlc.arg(dedup_seconds)::bigint)
    FROM doomed d
    WHERE sqlc.arg(dedup_seconds)::bigint > 0
      AND d.updated_at + make_interval(secs => sqlc.arg(dedup_seconds)::bigint) > sqlc.arg(now)::timestamptz
    ON CONFLICT (tenant_id, idempotency_key) DO UPDATE
    SET effect_id = excluded.effect_id, state = excluded.state, settled_at = excluded.settled_at,
        pruned_at = excluded.pruned_at, expires_at = excluded.expires_at
    WHERE excluded.settled_at >= tb.settled_at
    RETURNING tb.effect_id
),
deleted AS (
    DELETE FROM reckon_effects e WHERE e.id IN (SELECT d.id FROM doomed d) RETURNING e.id
)
SELECT (SELECT count(*) FROM candidates)::bigint AS candidates,
       (SELECT count(*) FROM deleted)::bigint AS effects,
       (SELECT count(*) FROM tombstones)::bigint AS tombstones,
       coalesce((SELECT max(c.updated_at) FROM candidates c), sqlc.arg(after)::timestamptz)::timestamptz AS last_at;

-- name: RetentionEffectCount :one
-- RetentionEffectPrune's effects (with their compensations), counted; a saga step or turn group that
-- the same run removes first does not hold an effect. Effects of a run with a reckon_runs row are
-- RetentionRunCount's.
WITH candidates AS (
    SELECT e.id
    FROM reckon_effects e
    LEFT JOIN reckon_retention_policies p ON p.tenant_id = e.tenant_id
    WHERE e.state IN ('CONFIRMED', 'FAILED')
      AND e.updated_at < sqlc.arg(scan_before)::timestamptz
      AND e.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
      AND e.compensates_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM reckon_runs r WHERE r.tenant_id = e.tenant_id AND r.id = e.run_id)
      AND NOT EXISTS (SELECT 1 FROM reckon_saga_steps st JOIN reckon_sagas s ON s.id = st.saga_id
          LEFT JOIN reckon_retention_policies ps ON ps.tenant_id = s.tenant_id
          WHERE st.effect_id = e.id AND NOT (s.state IN ('COMPLETED', 'COMPENSATED') AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(ps.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
      AND NOT EXISTS (SELECT 1 FROM reckon_saga_steps st JOIN reckon_sagas s ON s.id = st.saga_id
          LEFT JOIN reckon_retention_policies ps ON ps.tenant_id = s.tenant_id
          WHERE st.compensation_effect_id = e.id AND NOT (s.state IN ('COMPLETED', 'COMPENSATED') AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(ps.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
      AND NOT EXISTS (SELECT 1 FROM reckon_turns o
          LEFT JOIN reckon_retention_policies po ON po.tenant_id = split_part(o.session_key, ':', 1)
          WHERE o.turn_group = (CASE WHEN e.turn_group ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN e.turn_group END)::uuid
            AND (o.status NOT IN ('COMPLETE', 'SUPERSEDED', 'FAILED')
                 OR coalesce(o.completed_at, o.created_at) >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(po.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))
                 OR EXISTS (SELECT 1 FROM reckon_turns x WHERE x.superseded_by = o.id AND x.turn_group <> o.turn_group)))
      AND NOT EXISTS (
          SELECT 1 FROM reckon_effects c
          WHERE c.compensates_id = e.id
            AND (c.state NOT IN ('CONFIRMED', 'FAILED') OR c.updated_at >= sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(p.effect_retention_seconds, sqlc.arg(global_seconds)::bigint))))
      AND NOT EXISTS (SELECT 1 FROM reckon_effects c JOIN reckon_effects cc ON cc.compensates_id = c.id WHERE c.compensates_id = e.id)
      AND NOT EXISTS (SELECT 1 FROM reckon_effects c WHERE c.compensates_id = e.id AND EXISTS (SELECT 1 FROM reckon_saga_steps st JOIN reckon_sagas s ON s.id = st.saga_id
          LEFT JOIN reckon_retention_policies ps ON ps.tenant_id = s.tenant_id
          WHERE st.effect_id = c.id AND NOT (s.state IN ('COMPLETED', 'COMPENSATED') AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(ps.effect_retention_seconds, sqlc.arg(global_seconds)::bigint)))))
      AND NOT EXISTS (SELECT 1 FROM reckon_effects c WHERE c.compensates_id = e.id AND EXISTS (SELECT 1 FROM reckon_saga_steps st JOIN reckon_sagas s ON s.id = st.saga_id
          LEFT JOIN reckon_retention_policies ps ON ps.tenant_id = s.tenant_id
          WHERE st.compensation_effect_id = c.id AND NOT (s.state IN ('COMPLETED', 'COMPENSATED') AND s.updated_at < sqlc.arg(now)::timestamptz - make_interval(secs => coalesce(ps.effect_retention_seconds, sqlc.arg(global_seconds)::bigint)))))
)
SELECT ((SELECT count(*) FROM candidates)
        + (SELECT count(*) FROM reckon_effects c JOIN candidates x ON c.compensates_id = x.id))::bigint AS effects;

-- name: RetentionTombstonePrune :execrows
-- Deletes up to max_rows tombstones whose dedup window has passed.
DELETE FROM reckon_effect_tombstones tb
USING (
    SELECT x.tenant_id, x.idempotency_key FROM reckon_effect_tombstones x
    WHERE x.expires_at < sqlc.arg(now)::timestamptz
    ORDER BY x.expires_at
    LIMIT sqlc.arg(max_rows)::integer
    FOR UPDATE SKIP LOCKED
) doomed
WHERE tb.tenant_id = doomed.tenant_id AND tb.idempotency_key = doomed.idempotency_key;

-- name: RetentionTombstoneCount :one
SELECT count(*)::bigint FROM reckon_effect_tombstones WHERE expires_at < sqlc.arg(now)::timestamptz;

-- name: RetentionIdempotencyKeyPrune :execrows
-- Deletes up to max_rows stored Idempotency-Key responses created before the cutoff.
DELETE FROM reckon_idempotency_keys k
USING (
    SELECT x.tenant_id, x.key FROM reckon_idempotency_keys x
    WHERE x.created_at < sqlc.arg(cutoff)::timestamptz
    ORDER BY x.created_at
    LIMIT sqlc.arg(max_rows)::integer
    FOR UPDATE SKIP LOCKED
) doomed
WHERE k.tenant_id = doomed.tenant_id AND k.key = doomed.key;

-- name: RetentionIdempotencyKeyCount :one
SELECT count(*)::bigint FROM reckon_idempotency_keys WHERE created_at < sqlc.arg(cutoff)::timestamptz;

-- name: RetentionCallbackSignatureCount :one
SELECT count(*)::bigint FROM reckon_callback_signatures WHERE expires_at < sqlc.arg(now)::timestamptz;

-- name: RetentionOperatorSessionCount :one
SELECT count(*)::bigint FROM reckon_operator_sessions WHERE expires_at <= sqlc.arg(now)::timestamptz;

-- name: RetentionRunRecordPrune :execrows
-- Deletes up to max_rows finished records of retention runs started before the cutoff.
DELETE FROM reckon_retention_runs rr
WHERE rr.id IN (
    SELECT x.id FROM reckon_retention_runs x
    WHERE x.started_at < sqlc.arg(cutoff)::timestamptz
    ORDER BY x.started_at
    LIMIT sqlc.arg(max_rows)::integer
    FOR UPDATE SKIP LOCKED
);

-- name: RetentionRunRecordCount :one
SELECT count(*)::bigint FROM reckon_retention_runs WHERE started_at < sqlc.arg(cutoff)::timestamptz;

-- name: RetentionRunRecordStart :one
INSERT INTO reckon_retention_runs (actor, dry_run, started_at) VALUES (@actor, @dry_run, @started_at)
RETURNING id;

-- name: RetentionRunRecordFinish :exec
UPDATE reckon_retention_runs SET finished_at = @finished_at, removed = @removed, error = sqlc.narg(error)
WHERE id = @id;

-- name: RetentionRunRecordList :many
-- The latest records of retention runs, newest first.
SELECT * FROM reckon_retention_runs ORDER BY started_at DESC, id DESC LIMIT sqlc.arg(max_rows)::integer;

-- name: RetentionLockTry :one
-- Takes the retention lock of the current schema on this session, if free (pg_advisory_unlock, or
-- the end of the session, frees it). The lock is per schema, so that deployments in different
-- schemas of one database (db.ConfigureSchema) prune each its own at once: its second key is key
-- itself in public (the key of every version before schemas, so a rolling upgrade keeps one run at
-- a time), else hashtext('<schema>:<key>').
SELECT pg_try_advisory_lock(sqlc.arg(namespace)::integer,
    CASE WHEN current_schema() = 'public' THEN sqlc.arg(key)::integer
         ELSE hashtext(current_schema() || ':' || sqlc.arg(key)::integer::text) END)::boolean AS locked;

-- name: RetentionUnlock :exec
SELECT pg_advisory_unlock(sqlc.arg(namespace)::integer,
    CASE WHEN current_schema() = 'public' THEN sqlc.arg(key)::integer
         ELSE hashtext(current_schema() || ':' || sqlc.arg(key)::integer::text) END);

-- name: RetentionLockHeld :one
-- Whether a session holds the current schema's retention lock (a run is in progress somewhere).
SELECT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.classid::bigint = (sqlc.arg(namespace)::integer::bigint & 4294967295)
      AND l.objid::bigint = (CASE WHEN current_schema() = 'public' THEN sqlc.arg(key)::integer
                                  ELSE hashtext(current_schema() || ':' || sqlc.arg(key)::integer::text) END::bigint & 4294967295)
      AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
)::boolean AS held;

-- name: RetentionEnsurePartitions :one
SELECT reckon_audit_ensure_partitions(sqlc.arg(parent)::text, sqlc.arg(at)::timestamptz)::integer AS created;

-- name: RetentionDropPartition :one
-- Drops the partition and returns its rows, unless it is held: it still tells of an effect or saga
-- that exists (reckon_audit_drop_partition returned NULL).
SELECT (x.dropped IS NULL)::boolean AS held, coalesce(x.dropped, 0)::bigint AS dropped_rows
FROM (SELECT reckon_audit_drop_partition(sqlc.arg(name)::text, sqlc.arg(cutoff)::timestamptz, sqlc.arg(actor)::text, sqlc.arg(reason)::text) AS dropped) x;

-- name: RetentionSetLockTimeout :exec
-- Bounds how long the statements of this transaction wait for a lock (SET LOCAL lock_timeout).
SELECT set_config('lock_timeout', sqlc.arg(timeout)::text, true);

-- name: RetentionPartitionList :many
-- The registered partitions of the audit histories, oldest first.
SELECT * FROM reckon_audit_partitions ORDER BY range_to, partition;

-- name: RetentionPartitionHeld :one
-- Whether reckon_audit_drop_partition would keep the partition [range_from, range_to) of parent: it
-- holds a transition of an effect (a saga) created before range_to that still exists, or an event
-- an active webhook subscription has not delivered yet.
SELECT CASE sqlc.arg(parent)::text
    WHEN 'reckon_effect_transitions' THEN EXISTS (
        SELECT 1 FROM reckon_effect_transitions t JOIN reckon_effects e ON e.id = t.effect_id
        WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz
          AND e.created_at < sqlc.arg(range_to)::timestamptz) OR EXISTS (
        -- Effect transitions are events too: held like reckon_events below.
        SELECT 1 FROM reckon_event_subscriptions s
        WHERE s.state = 'active' AND EXISTS (
            SELECT 1 FROM reckon_effect_transitions t
            WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz
              AND t.xid IS NOT NULL
              AND (t.xid, t.id) > (coalesce(s.delivery_from_xid, s.position_xid), coalesce(s.delivery_from_seq, s.position_seq))))
    WHEN 'reckon_saga_transitions' THEN EXISTS (
        SELECT 1 FROM reckon_saga_transitions t JOIN reckon_sagas s ON s.id = t.saga_id
        WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz
          AND s.created_at < sqlc.arg(range_to)::timestamptz)
    -- An event an active webhook subscription has not delivered yet (migration 0028).
    WHEN 'reckon_events' THEN EXISTS (
        SELECT 1 FROM reckon_event_subscriptions s
        WHERE s.state = 'active' AND EXISTS (
            SELECT 1 FROM reckon_events e
            WHERE e.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND e.at < sqlc.arg(range_to)::timestamptz
              AND (e.xid, e.seq) > (coalesce(s.delivery_from_xid, s.position_xid), coalesce(s.delivery_from_seq, s.position_seq))))
    ELSE false
END::boolean AS held;

-- name: RetentionPartitionRows :one
-- The rows of the partition [range_from, range_to) of parent, counted.
SELECT CASE sqlc.arg(parent)::text
    WHEN 'reckon_effect_transitions' THEN (SELECT count(*) FROM reckon_effect_transitions t
        WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz)
    WHEN 'reckon_saga_transitions' THEN (SELECT count(*) FROM reckon_saga_transitions t
        WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz)
    WHEN 'reckon_definition_changes' THEN (SELECT count(*) FROM reckon_definition_changes t
        WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz)
    WHEN 'reckon_events' THEN (SELECT count(*) FROM reckon_events t
        WHERE t.at >= coalesce(sqlc.narg(range_from)::timestamptz, '-infinity') AND t.at < sqlc.arg(range_to)::timestamptz)
    ELSE 0
END::bigint AS row_count;

-- name: RetentionAuditSettingsGet :one
SELECT period, (extract(epoch FROM premake))::bigint AS premake_seconds FROM reckon_audit_settings WHERE id = 1;

-- name: RetentionAuditSettingsSet :one
-- Changes how the histories are cut from now on (the partitions created afterwards).
UPDATE reckon_audit_settings
SET period = coalesce(sqlc.narg(period)::text, period),
    premake = coalesce(make_interval(secs => sqlc.narg(premake_seconds)::bigint), premake)
WHERE id = 1
RETURNING period, (extract(epoch FROM premake))::bigint AS premake_seconds;

-- name: RetentionRelationSizes :many
-- Each relation's size on disk (table, indexes and TOAST; a partitioned table's partitions summed)
-- and its estimated rows (pg_class.reltuples: 0 until the table is first vacuumed or analyzed).
SELECT n.name::text AS name,
       coalesce((SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
                 WHERE c.oid = to_regclass(n.name)
                    OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = to_regclass(n.name))), 0)::bigint AS bytes,
       coalesce((SELECT sum(greatest(c.reltuples, 0)) FROM pg_class c
                 WHERE c.relkind = 'r' AND (c.oid = to_regclass(n.name)
                    OR c.oid IN (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = to_regclass(n.name)))), 0)::bigint AS rows_estimate
FROM unnest(sqlc.arg(names)::text[]) WITH ORDINALITY AS n(name, position)
ORDER BY n.position;

-- name: RetentionOldest :many
-- The oldest row of each table by the column retention goes by, read through an index; no row for
-- an empty table.
SELECT 'reckon_effects'::text AS name, 'settled' AS what, min(e.updated_at)::timestamptz AS oldest
FROM reckon_effects e WHERE e.state IN ('CONFIRMED', 'FAILED') HAVING min(e.updated_at) IS NOT NULL
UNION ALL
SELECT 'reckon_effects', 'unresolved', min(e.updated_at) FROM reckon_effects e WHERE e.state IN ('PENDING', 'UNKNOWN', 'STUCK') HAVING min(e.updated_at) IS NOT NULL
UNION ALL
SELECT 'reckon_sagas', 'finished', min(s.updated_at) FROM reckon_sagas s WHERE s.state IN ('COMPLETED', 'COMPENSATED') HAVING min(s.updated_at) IS NOT NULL
UNION ALL
SELECT 'reckon_runs', 'updated', min(r.updated_at) FROM reckon_runs r HAVING min(r.updated_at) IS NOT NULL
UNION ALL
SELECT 'reckon_turns', 'finished', min(t.created_at) FROM reckon_turns t WHERE t.status IN ('COMPLETE', 'SUPERSEDED', 'FAILED') HAVING min(t.created_at) IS NOT NULL
UNION ALL
SELECT 'reckon_idempotency_keys', 'created', min(k.created_at) FROM reckon_idempotency_keys k HAVING min(k.created_at) IS NOT NULL
UNION ALL
SELECT 'reckon_effect_tombstones', 'expiring', min(tb.expires_at) FROM reckon_effect_tombstones tb HAVING min(tb.expires_at) IS NOT NULL
UNION ALL
SELECT 'reckon_callback_signatures', 'expiring', min(cs.expires_at) FROM reckon_callback_signatures cs HAVING min(cs.expires_at) IS NOT NULL
UNION ALL
SELECT 'reckon_retention_runs', 'started', min(rr.started_at) FROM reckon_retention_runs rr HAVING min(rr.started_at) IS NOT NULL;
