-- System tokens and the audit of shared definitions (docs/api.md, docs/audit.md).
--
-- A system token belongs to the deployment, not to a tenant: it alone changes what every tenant
-- shares (HTTP connectors, saga definitions) and may manage any tenant's turn handler, and it is
-- refused on every tenant-scoped route. A tenant token, admin or not, keeps its tenant. Existing
-- tokens are tenant tokens and keep working; an admin token no longer changes connectors or saga
-- definitions (create a system token for that).
ALTER TABLE reckon_api_tokens
    ALTER COLUMN tenant_id DROP NOT NULL,
    ADD COLUMN system boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT reckon_api_tokens_system_no_tenant CHECK (system = (tenant_id IS NULL)),
    -- admin is a tenant token's right over its own tenant; a system token has no tenant.
    ADD CONSTRAINT reckon_api_tokens_system_not_admin CHECK (NOT (system AND admin));

-- Every change of a shared definition (an HTTP connector, a saga definition) and of a tenant's turn
-- handler made over the API, with who made it: written in the transaction of the change, so a
-- change that rolls back leaves no row and a committed one always has its row. Append-only.
CREATE TABLE reckon_definition_changes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('connector', 'saga_definition', 'turn_handler')),
    -- The connector's or the saga definition's name; the tenant's id for a turn handler.
    name       text NOT NULL CHECK (name <> ''),
    action     text NOT NULL CHECK (action IN ('create', 'replace', 'delete')),
    -- Who made it, as in the effects' audit trail: "api:{token name, or prefix}".
    actor      text NOT NULL CHECK (actor <> ''),
    -- The token that made it (reckon_api_tokens.id; tokens are revoked, never deleted).
    token_id   uuid,
    at         timestamptz NOT NULL DEFAULT now(),
    -- What was stored, as the API answered it; NULL for a delete.
    definition jsonb
);

CREATE INDEX reckon_definition_changes_name_idx ON reckon_definition_changes (kind, name, id);

CREATE FUNCTION reckon_definition_changes_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reckon: reckon_definition_changes is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER reckon_definition_changes_append_only
    BEFORE UPDATE OR DELETE ON reckon_definition_changes
    FOR EACH ROW EXECUTE FUNCTION reckon_definition_changes_append_only();

CREATE TRIGGER reckon_definition_changes_no_truncate
    BEFORE TRUNCATE ON reckon_definition_changes
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_definition_changes_append_only();
