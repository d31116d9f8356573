-- Servers and reactors reload the stored HTTP connectors and saga definitions as soon as one is
-- stored, replaced or deleted, not only every -connector-sync-interval: a statement that changes
-- either table notifies the channel reckon_definitions (the payload is the table's name), which
-- their loaders listen on (cmd/internal/definitions). The notification is sent at commit, whoever
-- writes (the API, the CLI, httpconn.Put from Go, an older binary). Creating a trigger rewrites
-- nothing; it takes a brief lock on two small tables that the running version rarely writes.
CREATE FUNCTION reckon_notify_definitions() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('reckon_definitions', TG_TABLE_NAME);
    RETURN NULL;
END
$$;

CREATE TRIGGER reckon_connectors_notify
    AFTER INSERT OR UPDATE OR DELETE ON reckon_connectors
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_notify_definitions();

CREATE TRIGGER reckon_saga_definitions_notify
    AFTER INSERT OR UPDATE OR DELETE ON reckon_saga_definitions
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_notify_definitions();
