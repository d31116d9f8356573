-- name: EffectInsert :one
-- Inserts a PENDING effect unless its idempotency key exists for the tenant or is kept by a live
-- tombstone of a pruned effect (then: no row, and EffectGetByIdempotencyKey and
-- EffectTombstoneGetLive tell which). The tombstone probe is one index lookup in the same
-- statement, so an enqueue costs no extra round trip. The insert trigger (AFTER INSERT, 0031)
-- records the insert with the given actor and reason; a skipped row records nothing. trace_context is the enqueuing span's carrier, NULL without one.
-- An effect with neither job nor lease is left for the claimers of queue (EffectClaim). An
-- ordered effect (ordering_key) has its order_seq (EffectOrderSeqs, drawn under the key's lock; a
-- compensation takes its original's), and is recorded waiting for its turn: no queue, its
-- claimers' queue in order_queue (EffectOrderHandOn gives it the queue when its turn comes). An effect with
-- business_key_dedup is skipped too while another effect not FAILED holds its (tenant, connector,
-- business key) (reckon_effects_business_key_uniq, 0039: the conflict has no target, so both unique
-- keys are arbiters); EffectGetByBusinessKey reads the holder. The tombstone probe is a
-- MATERIALIZED CTE so that Citus runs it before the insert in a cell (docs/deploy.md): the
-- INSERT … SELECT Citus would push down to the worker fails there (Citus 13.2 writes it with a
-- broken "IS NOT NULL" test); on one Postgres the plan is the same one-time probe.
WITH dead AS MATERIALIZED (
    SELECT 1 FROM reckon_effect_tombstones t
    WHERE t.tenant_id = @tenant_id AND t.idempotency_key = @idempotency_key AND t.expires_at > now()
)
INSERT INTO reckon_effects (
    id, tenant_id, connector, args, idempotency_key, business_key, policy, tags, max_attempts,
    timeout_ms, deadline_at, run_id, turn_id, turn_group, compensates_id, job_id, queue,
    confirmation, confirmation_prompt, confirmation_expires_at, confirmation_four_eyes,
    lease_owner, lease_token, lease_expires_at, attempts, owner, trace_context,
    async_timeout_ms, async_hard_timeout, transition_actor, transition_reason, transition_detail,
    ordering_key, order_seq, order_queue, not_before, business_key_dedup
)
SELECT
    @id, @tenant_id, @connector, @args, @idempotency_key, @business_key, @policy, @tags, @max_attempts,
    @timeout_ms, @deadline_at, @run_id, @turn_id, @turn_group, @compensates_id, @job_id, sqlc.narg(queue),
    sqlc.narg(confirmation), sqlc.narg(confirmation_prompt),
    now() + make_interval(0, 0, 0, 0, 0, 0, sqlc.narg(confirmation_ttl_ms)::bigint::float8 / 1000),
    coalesce(sqlc.narg(confirmation_four_eyes)::boolean, false),
    @lease_owner, @lease_token, @lease_expires_at, @attempts, sqlc.narg(owner), sqlc.narg(trace_context),
    sqlc.narg(async_timeout_ms), @async_hard_timeout, @actor::text, @reason::text, @detail,
    sqlc.narg(ordering_key)::text, sqlc.narg(order_seq)::bigint,
    sqlc.narg(order_queue)::text, sqlc.narg(not_before)::timestamptz, @business_key_dedup
WHERE NOT EXISTS (SELECT 1 FROM dead)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: EffectInsertMany :many
-- Inserts many PENDING effects in one statement; rows whose idempotency key exists, or is kept by
-- a live tombstone (as for EffectInsert), are skipped (and not returned). Array arguments are
-- parallel, and empty strings (a job id 0, a confirmation TTL 0, an async timeout 0, the nil turn
-- id) stand for NULL. trace_contexts may be NULL (no effect is traced: the common case sends
-- nothing), and so
-- may async_timeout_ms and async_hard_timeouts (no effect has async options): unnest runs the
-- arrays in lockstep and pads a shorter one with NULLs. So may ordering_keys (no effect is
-- ordered); an ordered effect ('' stands for none) takes its order_seq from order_seqs (drawn as
-- for EffectInsert; 0 for an unordered one), and order_queue and not_before (as EffectInsert's;
-- queue is '' for it: waiting). So may business_key_dedups (no effect dedups by business key); a
-- row whose business key is held is skipped, as for EffectInsert. The tombstones of the batch's
-- keys are read first, in a MATERIALIZED CTE, as for EffectInsert (one index probe per key).
WITH dead AS MATERIALIZED (
    SELECT t.tenant_id, t.idempotency_key
    FROM (SELECT unnest(sqlc.arg(tenant_ids)::text[]) AS tenant_id, unnest(sqlc.arg(idempotency_keys)::text[]) AS idempotency_key) k
    JOIN reckon_effect_tombstones t ON t.tenant_id = k.tenant_id AND t.idempotency_key = k.idempotency_key
    WHERE t.expires_at > now()
)
INSERT INTO reckon_effects (
    id, tenant_id, connector, args, idempotency_key, business_key, policy, tags, max_attempts,
    timeout_ms, run_id, turn_id, turn_group, job_id, queue, confirmation, confirmation_prompt,
    confirmation_expires_at, confirmation_four_eyes, owner, trace_context, async_timeout_ms, async_hard_timeout,
    transition_actor, transition_reason, ordering_key, order_seq, order_queue, not_before, business_key_dedup
)
SELECT
    u.id, u.tenant_id, u.connector, u.args, u.idempotency_key, nullif(u.business_key, ''),
    u.policy::reckon_effect_policy, string_to_array(nullif(u.tags, ''), ','), u.max_attempts, u.timeout_ms,
    nullif(u.run_id, ''), nullif(u.turn_id, '00000000-0000-0000-0000-000000000000'), nullif(u.turn_group, ''), nullif(u.job_id, 0), nullif(u.queue, ''),
    nullif(u.confirmation, ''), nullif(u.confirmation_prompt, ''),
    CASE WHEN u.confirmation_ttl_ms > 0 THEN now() + make_interval(0, 0, 0, 0, 0, 0, u.confirmation_ttl_ms::float8 / 1000) END,
    coalesce(u.confirmation_four_eyes, false),
    nullif(u.owner, ''), u.trace_context, nullif(u.async_timeout_ms, 0), coalesce(u.async_hard_timeout, false),
    sqlc.arg(actor)::text, sqlc.arg(reason)::text,
    nullif(u.ordering_key, ''),
    CASE WHEN nullif(u.ordering_key, '') IS NOT NULL THEN u.order_seq END,
    CASE WHEN nullif(u.ordering_key, '') IS NOT NULL THEN sqlc.narg(order_queue)::text END,
    CASE WHEN nullif(u.ordering_key, '') IS NOT NULL THEN sqlc.narg(not_before)::timestamptz END,
    coalesce(u.business_key_dedup, false)
FROM (
    SELECT
        unnest(sqlc.arg(ids)::uuid[]) AS id,
        unnest(sqlc.arg(tenant_ids)::text[]) AS tenant_id,
        unnest(sqlc.arg(connectors)::text[]) AS connector,
        unnest(sqlc.arg(args)::jsonb[]) AS args,
        unnest(sqlc.arg(idempotency_keys)::text[]) AS idempotency_key,
        unnest(sqlc.arg(business_keys)::text[]) AS business_key,
        unnest(sqlc.arg(policies)::text[]) AS policy,
        unnest(sqlc.arg(tags)::text[]) AS tags,
        unnest(sqlc.arg(max_attempts)::integer[]) AS max_attempts,
        unnest(sqlc.arg(timeout_ms)::integer[]) AS timeout_ms,
        unnest(sqlc.arg(run_ids)::text[]) AS run_id,
        unnest(sqlc.arg(turn_ids)::uuid[]) AS turn_id,
        unnest(sqlc.arg(turn_groups)::text[]) AS turn_group,
        unnest(sqlc.arg(job_ids)::bigint[]) AS job_id,
        unnest(sqlc.arg(queues)::text[]) AS queue,
        unnest(sqlc.arg(confirmations)::text[]) AS confirmation,
        unnest(sqlc.arg(confirmation_prompts)::text[]) AS confirmation_prompt,
        unnest(sqlc.arg(confirmation_ttl_ms)::bigint[]) AS confirmation_ttl_ms,
        unnest(sqlc.arg(confirmation_four_eyes)::boolean[]) AS confirmation_four_eyes,
        unnest(sqlc.arg(owners)::text[]) AS owner,
        unnest(sqlc.narg(async_timeout_ms)::integer[]) AS async_timeout_ms,
        unnest(sqlc.narg(async_hard_timeouts)::boolean[]) AS async_hard_timeout,
        unnest(sqlc.narg(trace_contexts)::jsonb[]) AS trace_context,
        unnest(sqlc.narg(ordering_keys)::text[]) AS ordering_key,
        unnest(sqlc.narg(order_seqs)::bigint[]) AS order_seq,
        unnest(sqlc.narg(business_key_dedups)::boolean[]) AS business_key_dedup
) AS u
WHERE (u.tenant_id, u.idempotency_key) NOT IN (SELECT d.tenant_id, d.idempotency_key FROM dead d)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: EffectGetByBusinessKey :one
-- The effect that holds a deduplicating business key (reckon_effects_business_key_uniq, 0039): at
-- most one, not FAILED.
SELECT * FROM reckon_effects
WHERE tenant_id = @tenant_id AND connector = @connector AND business_key = @business_key
  AND business_key_dedup AND state <> 'FAILED';

-- name: EffectGetByID :one
SELECT * FROM reckon_effects WHERE id = @id;

-- name: EffectGetByIDForUpdate :one
SELECT * FROM reckon_effects WHERE id = @id FOR UPDATE;

-- name: EffectGetByIdempotencyKey :one
SELECT * FROM reckon_effects WHERE tenant_id = @tenant_id AND idempotency_key = @idempotency_key;

-- name: EffectListByIdempotencyKeys :many
SELECT * FROM reckon_effects WHERE tenant_id = @tenant_id AND idempotency_key = ANY (@idempotency_keys::text[]);

-- name: EffectArgsEqual :one
-- Whether args equal the stored args of the effect, compared as jsonb (key order and spacing do
-- not matter).
SELECT args = @args::jsonb FROM reckon_effects WHERE id = @id;

-- name: EffectTransition :one
-- Moves an effect from one state to another, naming who and why. Returns no row when the effect is
-- no longer in from_state (someone else moved it first); the trigger refuses illegal transitions.
UPDATE reckon_effects
SET state = @to_state,
    transition_actor = @actor::text,
    transition_reason = @reason::text,
    transition_detail = @detail
WHERE id = @id AND state = @from_state
RETURNING *;

-- name: EffectSettle :one
-- Writes the outcome of an attempt or a reconciliation, fenced: only while the effect is still in
-- from_state and still belongs to the caller — its River job (job_id) or, for an inline attempt,
-- its lease (lease_token). It hands the effect to new_job_id, clears any lease, counts attempted
-- attempts, and keeps result and error when given NULL. An effect going back to PENDING starts
-- its count of inconclusive status checks over. No row: the caller was fenced out.
UPDATE reckon_effects
SET state = @to_state,
    attempts = attempts + @attempted::integer,
    inconclusive_checks = CASE WHEN @to_state::reckon_effect_state = 'PENDING' THEN 0 ELSE inconclusive_checks END,
    result = coalesce(sqlc.narg(result), result),
    error = coalesce(sqlc.narg(error), error),
    job_id = sqlc.narg(new_job_id),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    transition_actor = @actor::text,
    transition_reason = @reason::text,
    transition_detail = @detail
WHERE id = @id
  AND state = @from_state
  AND CASE WHEN sqlc.narg(lease_token)::uuid IS NOT NULL THEN lease_token = sqlc.narg(lease_token)::uuid
           ELSE job_id IS NOT DISTINCT FROM sqlc.narg(job_id)::bigint END
RETURNING *;

-- name: EffectRetryLater :one
-- Records a retryable failure of a PENDING effect (fenced like EffectSettle) and hands it to the
-- dispatch job that will try again. Not a transition: the effect stays PENDING.
UPDATE reckon_effects
SET attempts = attempts + 1,
    error = @error::text,
    job_id = @new_job_id::bigint,
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
WHERE id = @id
  AND state = 'PENDING'
  AND CASE WHEN sqlc.narg(lease_token)::uuid IS NOT NULL THEN lease_token = sqlc.narg(lease_token)::uuid
           ELSE job_id IS NOT DISTINCT FROM sqlc.narg(job_id)::bigint END
RETURNING *;

-- name: EffectAddInconclusiveCheck :one
-- Counts an inconclusive status check of an UNKNOWN effect, fenced by its reconcile job (the
-- effect must still be UNKNOWN and still that job's), and returns the new count. Not a
-- transition. No row: the caller was fenced out.
UPDATE reckon_effects
SET inconclusive_checks = inconclusive_checks + 1
WHERE id = @id AND state = 'UNKNOWN' AND job_id = @job_id::bigint
RETURNING inconclusive_checks;

-- name: EffectResetAttempts :exec
-- Gives a STUCK effect that an operator sends back to PENDING a fresh attempt budget.
UPDATE reckon_effects SET attempts = 0 WHERE id = @id AND state = 'STUCK';

-- name: EffectRedriveReset :exec
-- Prepares a FAILED effect that an operator redrives for a dispatch like a fresh enqueue's: a fresh
-- attempt budget, and no trace of an earlier acceptance upstream (correlation id, deadline), which
-- the new attempt replaces. An ordered effect is left waiting for its key's turn (no queue; its
-- claimers' queue in order_queue), which the caller then hands on. Not a transition: the caller's
-- EffectSettle, in the same transaction, moves it to PENDING.
UPDATE reckon_effects SET attempts = 0, correlation_id = NULL, deadline_at = NULL,
    queue = CASE WHEN ordering_key IS NULL THEN queue END,
    order_queue = CASE WHEN ordering_key IS NULL THEN order_queue ELSE coalesce(order_queue, queue, @queue::text) END
WHERE id = @id AND state = 'FAILED';

-- name: EffectSetJob :one
-- Hands an unresolved effect to a new job without a transition (the sweeper replacing a lost
-- reconcile job).
UPDATE reckon_effects SET job_id = @new_job_id::bigint
WHERE id = @id AND state = @state AND job_id IS NOT DISTINCT FROM sqlc.narg(job_id)::bigint
RETURNING *;

-- name: EffectSweepCandidates :many
-- Unresolved effects whose attempt or job is gone, oldest first, locked for the caller's
-- transaction (SKIP LOCKED, so that sweepers in several reactors share the work):
--   * an inline attempt whose lease expired;
--   * a dispatch or reconcile job running longer than the call timeout plus margin_ms (its worker
--     is presumed dead);
--   * no live job at all (deleted, discarded, cancelled, or completed without an outcome).
-- An effect waiting to be claimed (PENDING with a queue and neither job nor lease) has no job yet
-- and was never attempted: it is the claimers' (EffectClaim), not the sweeper's; nor is an ordered
-- effect waiting for its key's turn (no queue yet: the key's hand-on gives it one).
SELECT e.id, e.state, e.job_id, e.lease_token, e.attempts, e.connector, e.tenant_id, e.timeout_ms, e.policy,
       (e.lease_expires_at IS NOT NULL AND e.lease_expires_at < now())::boolean AS lease_expired,
       coalesce(j.state = 'running', false)::boolean AS job_running
FROM reckon_effects e
LEFT JOIN river_job j ON j.id = e.job_id
WHERE e.state IN ('PENDING', 'UNKNOWN')
  AND CASE
      WHEN e.lease_token IS NOT NULL THEN e.lease_expires_at < now()
      WHEN e.job_id IS NULL AND e.queue IS NOT NULL AND e.state = 'PENDING' THEN false
      WHEN e.job_id IS NULL AND e.ordering_key IS NOT NULL AND e.state = 'PENDING' THEN false
      WHEN j.id IS NULL OR j.state IN ('completed', 'cancelled', 'discarded') THEN e.updated_at < now() - make_interval(0, 0, 0, 0, 0, 0, sqlc.arg(margin_ms)::integer::float8 / 1000)
      WHEN j.state = 'running' THEN j.attempted_at < now() - make_interval(0, 0, 0, 0, 0, 0, (e.timeout_ms + sqlc.arg(margin_ms)::integer)::float8 / 1000)
      ELSE false
  END
ORDER BY e.updated_at
LIMIT @max_rows::integer
FOR UPDATE OF e SKIP LOCKED;

-- name: EffectList :many
-- Effects of a set of tenants, newest first, filtered by whatever is given; keyset pagination on
-- (created_at, id). Each tenant's newest rows come from reckon_effects_created_idx (or, for a
-- selective filter, the index that serves it) and are merged: no scan of the table, whatever the
-- tenants. Run it under EffectListPlanCustom: the optional filters need plans made for the values
-- given (a generic plan cannot use the index of a filter that may be NULL).
SELECT e.* FROM unnest(@tenant_ids::text[]) AS t(tenant_id)
CROSS JOIN LATERAL (
    SELECT * FROM reckon_effects r
    WHERE r.tenant_id = t.tenant_id
      AND (sqlc.narg(state)::reckon_effect_state IS NULL OR r.state = sqlc.narg(state)::reckon_effect_state)
      AND (sqlc.narg(connector)::text IS NULL OR r.connector = sqlc.narg(connector)::text)
      AND (sqlc.narg(run_id)::text IS NULL OR r.run_id = sqlc.narg(run_id)::text)
      AND (sqlc.narg(idempotency_key)::text IS NULL OR r.idempotency_key = sqlc.narg(idempotency_key)::text)
      AND (sqlc.narg(business_key)::text IS NULL OR r.business_key = sqlc.narg(business_key)::text)
      AND (sqlc.narg(turn_id)::uuid IS NULL OR r.turn_id = sqlc.narg(turn_id)::uuid)
      AND (sqlc.narg(compensates_id)::uuid IS NULL OR r.compensates_id = sqlc.narg(compensates_id)::uuid)
      AND (sqlc.narg(created_after)::timestamptz IS NULL OR r.created_at >= sqlc.narg(created_after)::timestamptz)
      AND (sqlc.narg(created_before)::timestamptz IS NULL OR r.created_at < sqlc.narg(created_before)::timestamptz)
      AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
           OR (r.created_at, r.id) < (sqlc.narg(cursor_created_at)::timestamptz, sqlc.narg(cursor_id)::uuid))
    ORDER BY r.created_at DESC, r.id DESC
    LIMIT @max_rows::integer
) e
ORDER BY e.created_at DESC, e.id DESC
LIMIT @max_rows::integer;

-- name: EffectListPlanCustom :exec
-- Makes the statements of the rest of the transaction planned for their parameters' values every
-- time (plan_cache_mode force_custom_plan), for EffectList.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true);

-- name: EffectListSettled :many
-- Which of the given effects are CONFIRMED, FAILED or STUCK.
SELECT id, state FROM reckon_effects
WHERE id = ANY (@ids::uuid[]) AND state IN ('CONFIRMED', 'FAILED', 'STUCK');

-- name: EffectSettleMany :many
-- EffectSettle for many dispatch outcomes at once (group commit), in one statement: each effect is
-- fenced by its own job (still PENDING, still that job's) and leaves for a terminal state without
-- a follow-up job, and the jobs of the effects written are completed as river.JobCompleteTx
-- completes one (state completed, finalized_at now) — unless complete_jobs says no: a batch job
-- carrying other effects completes when River sees its Work return. River's completer later finds them completed
-- and leaves them alone, as after JobCompleteTx. Returns the effects written, with their enqueue
-- and settlement times (the settle latency); the missing ones were fenced out.
WITH settled AS (
    UPDATE reckon_effects e
    -- The state spelled out rather than cast (u.to_state::reckon_effect_state): an enum's input
    -- function is STABLE, and Citus refuses a STABLE function of a column in an UPDATE. A name
    -- that is no state leaves NULL, which the NOT NULL column refuses, as the cast would.
    SET state = CASE u.to_state
            WHEN 'PENDING' THEN 'PENDING'::reckon_effect_state
            WHEN 'CONFIRMED' THEN 'CONFIRMED'::reckon_effect_state
            WHEN 'FAILED' THEN 'FAILED'::reckon_effect_state
            WHEN 'UNKNOWN' THEN 'UNKNOWN'::reckon_effect_state
            WHEN 'STUCK' THEN 'STUCK'::reckon_effect_state
        END,
        attempts = e.attempts + 1,
        result = coalesce(u.result, e.result),
        error = coalesce(nullif(u.error, ''), e.error),
        job_id = NULL,
        transition_actor = u.actor,
        transition_reason = u.reason,
        transition_detail = u.detail
    FROM (
        SELECT
            unnest(sqlc.arg(ids)::uuid[]) AS id,
            unnest(sqlc.arg(job_ids)::bigint[]) AS job_id,
            unnest(sqlc.arg(complete_jobs)::boolean[]) AS complete_job,
            unnest(sqlc.arg(to_states)::text[]) AS to_state,
            unnest(sqlc.arg(results)::jsonb[]) AS result,
            unnest(sqlc.arg(errors)::text[]) AS error,
            unnest(sqlc.arg(actors)::text[]) AS actor,
            unnest(sqlc.arg(reasons)::text[]) AS reason,
            unnest(sqlc.arg(details)::jsonb[]) AS detail
    ) AS u
    -- Owned effects never come here (their owner's hook runs in a transaction of their own); an
    -- owned row is left alone, as if fenced out. `e.id = ANY (ids)` repeats the join for the
    -- planner: it bounds the effects read to the batch whatever the statistics say (without it, an
    -- unanalyzed table once made each batch scan every PENDING effect for every outcome).
    WHERE e.id = ANY (sqlc.arg(ids)::uuid[])
      AND e.id = u.id AND e.state = 'PENDING' AND e.job_id = u.job_id AND e.owner IS NULL
    RETURNING e.id, e.connector, e.policy, e.state, e.created_at, e.updated_at, u.job_id, u.complete_job
),
completed AS ( -- runs whether or not it is referenced, as every data-modifying CTE does
    UPDATE river_job SET state = 'completed', finalized_at = now()
    WHERE id IN (SELECT job_id FROM settled WHERE complete_job) AND state = 'running'
)
SELECT id, connector, policy, state, created_at, updated_at FROM settled;

-- name: EffectListByIDs :many
SELECT * FROM reckon_effects WHERE id = ANY (@ids::uuid[]);

-- Pending events (0005_pending).

-- name: EffectAccept :one
-- Records that the upstream accepted a PENDING effect and will call back (fenced like
-- EffectSettle): the attempt is counted, the lease cleared, and the effect handed to its deadline
-- job. Not a transition: the effect stays PENDING, awaiting its callback until deadline_at.
UPDATE reckon_effects
SET attempts = attempts + 1,
    correlation_id = @correlation_id::text,
    deadline_at = @deadline_at::timestamptz,
    job_id = @new_job_id::bigint,
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
WHERE id = @id
  AND state = 'PENDING'
  AND CASE WHEN sqlc.narg(lease_token)::uuid IS NOT NULL THEN lease_token = sqlc.narg(lease_token)::uuid
           ELSE job_id IS NOT DISTINCT FROM sqlc.narg(job_id)::bigint END
RETURNING *;

-- name: EffectListByCorrelationIDForUpdate :many
-- The effects holding a correlation id: of one tenant (at most one), or of any tenant when the
-- tenant is '' (more than one means the id is ambiguous). At most two are returned.
SELECT * FROM reckon_effects
WHERE correlation_id = @correlation_id AND (@tenant_id::text = '' OR tenant_id = @tenant_id::text)
ORDER BY id
LIMIT 2
FOR UPDATE;

-- name: EffectListByRun :many
-- The effects of a tenant's run, oldest first.
SELECT * FROM reckon_effects WHERE tenant_id = @tenant_id AND run_id = @run_id::text ORDER BY created_at, id;

-- name: EffectListUnresolvedByRun :many
-- The ids of the effects of a tenant's run that are PENDING or UNKNOWN.
SELECT id FROM reckon_effects
WHERE tenant_id = @tenant_id AND run_id = @run_id::text AND state IN ('PENDING', 'UNKNOWN');

-- name: EffectListPendingByRunForUpdate :many
-- The PENDING effects of a tenant's run with the state of their job, locked for the caller's
-- transaction. Compensations are left out: cancelling a run never stops what undoes it.
SELECT sqlc.embed(e), coalesce(j.state::text, '')::text AS job_state, coalesce(j.attempt, 0)::integer AS job_attempt
FROM reckon_effects e
LEFT JOIN river_job j ON j.id = e.job_id
WHERE e.tenant_id = @tenant_id AND e.run_id = @run_id::text AND e.state = 'PENDING' AND e.compensates_id IS NULL
ORDER BY e.created_at, e.id
FOR UPDATE OF e;

-- name: EffectSetCorrelationID :one
-- Records the correlation id of an effect resolved by a callback that overtook the record of its
-- acceptance. Not a transition.
UPDATE reckon_effects SET correlation_id = @correlation_id::text
WHERE id = @id AND correlation_id IS NULL
RETURNING *;

-- Claiming (0023_claims).

-- name: EffectClaimable :many
-- The oldest effects of queue waiting to be claimed (PENDING, neither job nor lease), locked for
-- the caller's transaction: SKIP LOCKED, so that the claimers of several reactors share them and
-- none waits on an effect an operator or a run cancellation holds. An effect awaiting its
-- confirmation is not claimable. Served by reckon_effects_claimable_idx. trace_context lets a job of one effect continue the effect's trace.
-- not_before is set only on an ordered effect enqueued with ScheduledAt: its job is due then.
SELECT id, timeout_ms, trace_context, not_before FROM reckon_effects
WHERE queue = @queue::text AND state = 'PENDING' AND job_id IS NULL AND lease_token IS NULL
  AND confirmation IS DISTINCT FROM 'AWAITING'
ORDER BY created_at
LIMIT @max_rows::integer
FOR UPDATE SKIP LOCKED;

-- name: EffectStampJobs :exec
-- Hands claimed effects (locked by EffectClaimable in the same transaction) to their dispatch
-- jobs. Not a transition: the effects stay PENDING.
UPDATE reckon_effects e SET job_id = u.job_id
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@job_ids::bigint[]) AS job_id) AS u
WHERE e.id = ANY (@ids::uuid[]) AND e.id = u.id AND e.state = 'PENDING' AND e.job_id IS NULL;

-- Confirmation holds (0024_confirmations).

-- name: EffectConfirmationDecide :one
-- Records the decision on an effect awaiting its confirmation (locked by the caller): CONFIRMED
-- makes it claimable; DECLINED and EXPIRED go with its settlement as FAILED, in the same
-- transaction. Not a transition itself: the caller records the observation or the settlement.
UPDATE reckon_effects SET confirmation = @decision::text, confirmation_by = @actor::text,
    confirmation_at = now(), confirmation_reason = @reason::text
WHERE id = @id AND state = 'PENDING' AND confirmation = 'AWAITING'
RETURNING *;

-- name: EffectConfirmationExpired :many
-- Effects whose confirmation did not come before their expiry, oldest expiry first, locked for
-- the caller's transaction (SKIP LOCKED: the sweepers of several reactors share them).
SELECT id FROM reckon_effects
WHERE confirmation = 'AWAITING' AND confirmation_expires_at <= now() AND state = 'PENDING'
ORDER BY confirmation_expires_at
LIMIT @max_rows::integer
FOR UPDATE SKIP LOCKED;

-- name: EffectCountPendingIrreversibleByTurn :one
-- How many effects of a turn cannot be undone and are not settled: irreversible ones PENDING or
-- UNKNOWN, and any awaiting a person's confirmation (it may be confirmed at any moment). What a
-- turn's supersede decider is shown (turns.DecisionInput.PendingIrreversible).
SELECT count(*) FROM reckon_effects
WHERE turn_id = @turn_id AND state IN ('PENDING', 'UNKNOWN')
  AND (policy = 'irreversible' OR confirmation = 'AWAITING');

-- Ordering keys (0035_ordering_keys).

-- The key's lock must be taken where its hand-on trigger takes it, on the node of the effects'
-- table: on a Citus cell (docs/deploy.md) that is a worker, not the node the client is connected
-- to. So EffectOrderLock reads reckon_audit_settings (one row, always): a statement that reads a
-- table of the schema runs where the schema's tables are. On one Postgres it changes nothing.

-- name: EffectOrderLock :exec
-- Takes the transaction advisory locks of the given (tenant, ordering key) pairs, in a fixed
-- order (a volatile function of the select list runs after the sort): enqueues and hand-ons of one
-- key serialise on it, so that order_seq follows the order in which the enqueues commit and no
-- hand-on misses an effect enqueued meanwhile.
SELECT reckon_order_lock(u.tenant_id, u.ordering_key)
FROM reckon_audit_settings, (
    SELECT DISTINCT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ordering_keys::text[]) AS ordering_key
) u
ORDER BY u.tenant_id, u.ordering_key;

-- name: EffectOrderSeqs :many
-- Draws n values of the ordering keys' sequence, in order, for the order_seq of n ordered effects
-- about to be inserted: drawn after the keys' locks (EffectOrderLock), they follow the order of
-- the enqueues of each key. (On a Citus cell the sequence is on the coordinator, where this runs.)
SELECT nextval('reckon_effects_order_seq')::bigint AS order_seq FROM generate_series(1, @n::integer);

-- name: EffectOrderHandOn :exec
-- Gives each of the given keys its next turn if none of its unsettled effects has one
-- (reckon_order_hand_on_key): after recording ordered effects waiting, under the keys' locks
-- (EffectOrderLock). It runs where the client is connected: on a Citus cell, the coordinator,
-- where the function's queries of the effects reach the worker (Citus refuses them from a
-- statement it pushed down to the worker); the lock the function takes there is an extra one,
-- under the worker's lock the transaction holds, and its notification is sent from there.
SELECT reckon_order_hand_on_key(u.tenant_id, u.ordering_key)
FROM (
    SELECT DISTINCT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ordering_keys::text[]) AS ordering_key
) u
ORDER BY u.tenant_id, u.ordering_key;

-- name: EffectOrderBusy :one
-- Whether a tenant's ordering key has an unsettled effect (read under the key's lock by an inline
-- Do, which then records its effect waiting instead of calling it).
SELECT EXISTS (
    SELECT 1 FROM reckon_effects
    WHERE tenant_id = @tenant_id AND ordering_key = @ordering_key::text AND state IN ('PENDING', 'UNKNOWN', 'STUCK')
)::boolean AS busy;

-- name: EffectOrderChain :many
-- The unsettled effects of a tenant's ordering key in the order they get their turns: the one
-- that has the turn first (claimable, claimed, in flight, UNKNOWN or STUCK), then the waiting
-- ones by order_seq. Served by reckon_effects_ordering_idx.
SELECT id, state, connector, idempotency_key, order_seq, created_at,
       (state = 'PENDING' AND queue IS NULL AND job_id IS NULL AND lease_token IS NULL)::boolean AS waiting
FROM reckon_effects
WHERE tenant_id = @tenant_id AND ordering_key = @ordering_key::text AND state IN ('PENDING', 'UNKNOWN', 'STUCK')
ORDER BY (state = 'PENDING' AND queue IS NULL AND job_id IS NULL AND lease_token IS NULL), order_seq, id
LIMIT @max_rows::integer;
