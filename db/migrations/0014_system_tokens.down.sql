DROP TABLE IF EXISTS reckon_definition_changes;
DROP FUNCTION IF EXISTS reckon_definition_changes_append_only();
-- System tokens cannot exist without the column that marks them: they are deleted (the older
-- binaries could not have used them).
DELETE FROM reckon_api_tokens WHERE system;
ALTER TABLE reckon_api_tokens
    DROP CONSTRAINT reckon_api_tokens_system_not_admin,
    DROP CONSTRAINT reckon_api_tokens_system_no_tenant,
    DROP COLUMN system,
    ALTER COLUMN tenant_id SET NOT NULL;
