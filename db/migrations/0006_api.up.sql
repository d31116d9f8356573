-- The HTTP API of cmd/server (docs/api.md): tenants, their bearer tokens, the
-- responses stored for the Idempotency-Key header, and the audit views over effects and their
-- transitions.

-- A tenant owns effects (reckon_effects.tenant_id, which is deliberately not a foreign key: a Go
-- service may record effects for tenants the API has never heard of) and API tokens.
CREATE TABLE reckon_tenants (
    id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- A disabled tenant's tokens are refused; its effects stay as they are.
    disabled_at timestamptz
);

-- Bearer tokens. Only the SHA-256 of a token is stored: the token itself is shown once, when it is
-- created. prefix (the first characters of the token) lets an operator tell tokens apart.
CREATE TABLE reckon_api_tokens (
    id           uuid PRIMARY KEY,
    tenant_id    text NOT NULL REFERENCES reckon_tenants (id),
    name         text NOT NULL DEFAULT '',
    prefix       text NOT NULL,
    token_sha256 bytea NOT NULL CHECK (length(token_sha256) = 32),
    -- An admin token may also change what every tenant shares (the HTTP connectors).
    admin        boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    CONSTRAINT reckon_api_tokens_sha256_uniq UNIQUE (token_sha256)
);

CREATE INDEX reckon_api_tokens_tenant_idx ON reckon_api_tokens (tenant_id, created_at);

-- The first successful response to a POST carrying an Idempotency-Key header, per tenant and key.
-- A retry with the same key and the same request (request_sha256 covers method, path and the
-- canonical JSON body) gets this response again; another request with the key is refused. The
-- request's transaction claims the key first (status and response NULL; a concurrent request with
-- the same key waits on the row) and stores the response before it commits, so a committed row
-- always has both, and the response commits or rolls back together with what the request did.
CREATE TABLE reckon_idempotency_keys (
    tenant_id      text NOT NULL,
    key            text NOT NULL CHECK (key <> ''),
    method         text NOT NULL,
    path           text NOT NULL,
    request_sha256 bytea NOT NULL,
    status         integer CHECK (status BETWEEN 100 AND 599),
    response       bytea,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX reckon_idempotency_keys_created_idx ON reckon_idempotency_keys (created_at);

-- Audit views (recipes in docs/audit.md). They read the effects and their append-only trail; they
-- add no state of their own.

-- reckon_audit_transitions: every transition, with what it was a transition of.
CREATE VIEW reckon_audit_transitions AS
SELECT t.id, t.effect_id, t.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key,
       e.run_id, t.from_state, t.to_state, t.actor, t.reason, t.attempt, t.at, t.detail,
       (t.from_state IS NOT DISTINCT FROM t.to_state) AS observation
FROM reckon_effect_transitions t
JOIN reckon_effects e ON e.id = t.effect_id;

-- reckon_audit_effects: one row per effect, with when it was settled and its latest transition.
CREATE VIEW reckon_audit_effects AS
SELECT e.id, e.tenant_id, e.connector, e.policy, e.tags, e.state, e.idempotency_key, e.business_key,
       e.args, e.result, e.error, e.attempts, e.max_attempts, e.run_id, e.turn_id, e.turn_group,
       e.compensates_id, e.created_at, e.updated_at,
       CASE WHEN e.state IN ('CONFIRMED', 'FAILED') THEN e.updated_at END AS settled_at,
       last.actor AS last_actor, last.reason AS last_reason, last.at AS last_at,
       (SELECT count(*) FROM reckon_effects c WHERE c.compensates_id = e.id) AS compensations
FROM reckon_effects e
LEFT JOIN LATERAL (
    SELECT t.actor, t.reason, t.at
    FROM reckon_effect_transitions t
    WHERE t.effect_id = e.id AND t.from_state IS DISTINCT FROM t.to_state
    ORDER BY t.id DESC
    LIMIT 1
) last ON true;

-- reckon_audit_stuck: the effects waiting for an operator, with why and since when they are STUCK.
CREATE VIEW reckon_audit_stuck AS
SELECT e.id, e.tenant_id, e.connector, e.policy, e.idempotency_key, e.business_key, e.args,
       e.error, e.attempts, e.run_id, e.created_at,
       s.at AS stuck_since, s.actor AS stuck_by, s.reason AS stuck_reason, s.detail AS stuck_detail,
       now() - s.at AS stuck_for
FROM reckon_effects e
LEFT JOIN LATERAL (
    SELECT t.at, t.actor, t.reason, t.detail
    FROM reckon_effect_transitions t
    WHERE t.effect_id = e.id AND t.to_state = 'STUCK' AND t.from_state IS DISTINCT FROM t.to_state
    ORDER BY t.id DESC
    LIMIT 1
) s ON true
WHERE e.state = 'STUCK';
