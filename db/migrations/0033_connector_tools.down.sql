-- Going down forgets the HTTP connectors' descriptions, args schemas and tenants: their effects'
-- args are no longer checked, and every tenant may use every connector again.
ALTER TABLE reckon_connectors
    DROP COLUMN IF EXISTS tenants,
    DROP COLUMN IF EXISTS args_schema,
    DROP COLUMN IF EXISTS description;
