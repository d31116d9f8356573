-- Operator accounts (docs/operations.md, "Operator accounts"): the people who use the console and
-- the operator CLI, with a role and a scope of tenants, and the console's sign-in sessions.

-- An operator signs in with a bearer token of its own. As for reckon_api_tokens, only the SHA-256
-- of the token is stored: the token is shown once, when the operator is added; prefix (its first
-- characters) tells tokens apart. Operators are revoked, never deleted, so that the audit trail's
-- "console:{name}" keeps meaning someone; a name is unique among the operators not revoked and may
-- be given again after a revocation.
CREATE TABLE reckon_operators (
    id           uuid PRIMARY KEY,
    name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9._@-]{1,64}$'),
    -- viewer reads; operator also resolves and cancels; admin also manages operators.
    role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    -- The tenants the operator sees and acts on; NULL: every tenant. Tenants need not exist.
    tenants      text[] CHECK (tenants IS NULL OR cardinality(tenants) > 0),
    prefix       text NOT NULL,
    token_sha256 bytea NOT NULL CHECK (length(token_sha256) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    CONSTRAINT reckon_operators_sha256_uniq UNIQUE (token_sha256)
);

CREATE UNIQUE INDEX reckon_operators_name_uniq ON reckon_operators (name) WHERE revoked_at IS NULL;

-- The console's sessions: the cookie holds a random id, of which only the SHA-256 is stored. A
-- session ends when it expires, when its operator signs out, or when its operator is revoked (the
-- revocation deletes them). Expired rows are deleted a few at a time at every sign-in.
CREATE TABLE reckon_operator_sessions (
    id_sha256   bytea PRIMARY KEY CHECK (length(id_sha256) = 32),
    operator_id uuid NOT NULL REFERENCES reckon_operators (id) ON DELETE CASCADE,
    -- The token every form of the session carries (CSRF protection).
    csrf        text NOT NULL CHECK (csrf <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

CREATE INDEX reckon_operator_sessions_expires_idx ON reckon_operator_sessions (expires_at);
CREATE INDEX reckon_operator_sessions_operator_idx ON reckon_operator_sessions (operator_id);
