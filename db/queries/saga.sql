-- name: SagaInsert :one
-- Inserts a RUNNING saga unless its start key exists for the tenant (then: no row).
INSERT INTO reckon_sagas (id, tenant_id, name, start_key, input, step_count)
VALUES (@id, @tenant_id, @name, sqlc.narg(start_key), @input, @step_count)
ON CONFLICT (tenant_id, start_key) DO NOTHING
RETURNING *;

-- name: SagaGetByID :one
SELECT * FROM reckon_sagas WHERE id = @id;

-- name: SagaGetByIDForUpdate :one
SELECT * FROM reckon_sagas WHERE id = @id FOR UPDATE;

-- name: SagaGetByStartKey :one
SELECT * FROM reckon_sagas WHERE tenant_id = @tenant_id AND start_key = @start_key;

-- name: SagaUpdate :one
-- Sets the saga's state, current step, error (NULL keeps it) and stuck reason (NULL clears it).
UPDATE reckon_sagas
SET state = @state, current_step = @current_step, error = coalesce(sqlc.narg(error), error),
    stuck_reason = sqlc.narg(stuck_reason), updated_at = now()
WHERE id = @id
RETURNING *;

-- name: SagaList :many
-- Sagas of a tenant, newest first, filtered by whatever is given; keyset pagination on
-- (created_at, id).
SELECT * FROM reckon_sagas
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(state)::reckon_saga_state IS NULL OR state = sqlc.narg(state)::reckon_saga_state)
  AND (sqlc.narg(name)::text IS NULL OR name = sqlc.narg(name)::text)
  AND (sqlc.narg(cursor_created_at)::timestamptz IS NULL
       OR (created_at, id) < (sqlc.narg(cursor_created_at)::timestamptz, sqlc.narg(cursor_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max_rows::integer;

-- name: SagaCountByState :many
-- How many sagas of each definition are in each state: the saga part of the shared statistics
-- (reckon_sagas), computed by one reactor per interval. A scan of reckon_sagas.
SELECT name, state, count(*)::bigint AS count FROM reckon_sagas GROUP BY name, state;

-- name: SagaStepInsert :exec
-- Records a step whose effect was just enqueued. A step recorded already is left alone.
INSERT INTO reckon_saga_steps (saga_id, idx, name, effect_id)
VALUES (@saga_id, @idx, @name, @effect_id)
ON CONFLICT (saga_id, idx) DO NOTHING;

-- name: SagaStepList :many
SELECT * FROM reckon_saga_steps WHERE saga_id = @saga_id ORDER BY idx;

-- name: SagaStepListBySagas :many
SELECT * FROM reckon_saga_steps WHERE saga_id = ANY (@saga_ids::uuid[]) ORDER BY saga_id, idx;

-- name: SagaStepGetByEffect :one
-- The step whose effect, or whose latest compensation effect, is effect_id.
SELECT * FROM reckon_saga_steps WHERE effect_id = @effect_id OR compensation_effect_id = @effect_id;

-- name: SagaStepSettle :exec
-- Records the settled state of a step's effect (or of its compensation), with its result and error
-- (NULL keeps what is there).
UPDATE reckon_saga_steps
SET state = @state,
    result = coalesce(sqlc.narg(result), result),
    compensation_result = coalesce(sqlc.narg(compensation_result), compensation_result),
    error = coalesce(sqlc.narg(error), error),
    updated_at = now()
WHERE saga_id = @saga_id AND idx = @idx;

-- name: SagaStepCompensating :exec
-- Hands a step to a new compensation effect and counts it.
UPDATE reckon_saga_steps
SET state = 'COMPENSATING',
    compensation_effect_id = @compensation_effect_id,
    compensation_attempts = compensation_attempts + 1,
    updated_at = now()
WHERE saga_id = @saga_id AND idx = @idx;

-- name: SagaStepResetCompensationBudget :exec
-- An operator gives a step's compensation a fresh budget.
UPDATE reckon_saga_steps SET compensation_budget_base = compensation_attempts, updated_at = now()
WHERE saga_id = @saga_id AND idx = @idx;

-- name: SagaTransitionInsert :exec
INSERT INTO reckon_saga_transitions (saga_id, from_state, to_state, step, actor, reason)
VALUES (@saga_id, sqlc.narg(from_state), @to_state, @step, @actor, @reason);

-- name: SagaTransitionList :many
SELECT * FROM reckon_saga_transitions WHERE saga_id = @saga_id ORDER BY id;
