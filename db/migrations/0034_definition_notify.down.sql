DROP TRIGGER IF EXISTS reckon_saga_definitions_notify ON reckon_saga_definitions;
DROP TRIGGER IF EXISTS reckon_connectors_notify ON reckon_connectors;
DROP FUNCTION IF EXISTS reckon_notify_definitions();
