-- name: ConnectorUpsert :one
-- Inserts or replaces an HTTP connector; inserted is true for a new one. (Times come from the
-- VALUES: Citus refuses now() in DO UPDATE SET.)
INSERT INTO reckon_connectors (
    name, tags, dispatch_url, status_url, compensate_url, business_key_fields, timeout_ms,
    max_attempts, status_check_limit, backoff_initial_ms, backoff_max_ms, unsafe,
    async_timeout_ms, hard_timeout, cancel_url, requires_confirmation, confirmation_prompt,
    limit_rate, limit_per_ms, limit_burst, limit_max_in_flight, limit_per_tenant, limit_break_after, limit_break_for_ms,
    description, args_schema, tenants, ordering_key_fields, dedup_by_business_key, updated_at
) VALUES (
    @name, @tags, @dispatch_url, @status_url, @compensate_url, @business_key_fields, @timeout_ms,
    @max_attempts, @status_check_limit, @backoff_initial_ms, @backoff_max_ms, @unsafe,
    sqlc.narg(async_timeout_ms), @hard_timeout, sqlc.narg(cancel_url), @requires_confirmation, sqlc.narg(confirmation_prompt),
    @limit_rate, @limit_per_ms, @limit_burst, @limit_max_in_flight, @limit_per_tenant, @limit_break_after, @limit_break_for_ms,
    @description, sqlc.narg(args_schema), @tenants, @ordering_key_fields, @dedup_by_business_key, now()
)
ON CONFLICT (name) DO UPDATE SET
    tags = excluded.tags,
    dispatch_url = excluded.dispatch_url,
    status_url = excluded.status_url,
    compensate_url = excluded.compensate_url,
    business_key_fields = excluded.business_key_fields,
    ordering_key_fields = excluded.ordering_key_fields,
    dedup_by_business_key = excluded.dedup_by_business_key,
    timeout_ms = excluded.timeout_ms,
    max_attempts = excluded.max_attempts,
    status_check_limit = excluded.status_check_limit,
    backoff_initial_ms = excluded.backoff_initial_ms,
    backoff_max_ms = excluded.backoff_max_ms,
    unsafe = excluded.unsafe,
    async_timeout_ms = excluded.async_timeout_ms,
    hard_timeout = excluded.hard_timeout,
    cancel_url = excluded.cancel_url,
    requires_confirmation = excluded.requires_confirmation,
    confirmation_prompt = excluded.confirmation_prompt,
    limit_rate = excluded.limit_rate,
    limit_per_ms = excluded.limit_per_ms,
    limit_burst = excluded.limit_burst,
    limit_max_in_flight = excluded.limit_max_in_flight,
    limit_per_tenant = excluded.limit_per_tenant,
    limit_break_after = excluded.limit_break_after,
    limit_break_for_ms = excluded.limit_break_for_ms,
    description = excluded.description,
    args_schema = excluded.args_schema,
    tenants = excluded.tenants,
    updated_at = excluded.updated_at
RETURNING sqlc.embed(reckon_connectors), (xmax = 0)::boolean AS inserted;

-- name: ConnectorGet :one
SELECT * FROM reckon_connectors WHERE name = @name;

-- name: ConnectorList :many
-- Every HTTP connector, by name.
SELECT * FROM reckon_connectors ORDER BY name;

-- name: ConnectorDelete :one
-- Deletes an HTTP connector and returns its name; no row when there is none.
DELETE FROM reckon_connectors WHERE name = @name RETURNING name;

-- name: ConnectorUnresolvedCount :one
-- How many effects of the connector are PENDING or UNKNOWN: work a reactor still has to do with it.
SELECT count(*) FROM reckon_effects
WHERE connector = @connector AND state IN ('PENDING', 'UNKNOWN');
