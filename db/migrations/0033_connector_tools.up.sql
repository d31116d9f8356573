-- What an HTTP connector is for and what its args look like (effects.Connector.Description and
-- ArgsSchema: the MCP gateway shows them as a tool's description and input schema), and which
-- tenants may use it (effects.Connector.Tenants; empty: every tenant). Constant defaults and a
-- nullable column: adding them rewrites no rows, and a server or reactor of the previous version,
-- which names its columns, keeps working while this one runs.
ALTER TABLE reckon_connectors
    ADD COLUMN description text NOT NULL DEFAULT '' CHECK (length(description) <= 4000),
    ADD COLUMN args_schema jsonb CHECK (jsonb_typeof(args_schema) = 'object'),
    ADD COLUMN tenants text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tenants) <= 1000);
