-- Operators' pauses of connectors (0036_connector_pauses, docs/design.md "Limits").

-- name: ConnectorPause :one
-- Pauses a connector for a tenant ('' : every tenant), logged and notified; a key already paused
-- keeps its pause (created false).
SELECT p.paused_by::text AS paused_by, p.reason::text AS reason, p.paused_at::timestamptz AS paused_at,
       p.created::boolean AS created
FROM reckon_connector_pause(@connector::text, @tenant_id::text, @actor::text, @reason::text) AS p;

-- name: ConnectorResume :one
-- Ends a connector's pause for a tenant ('' : the pause of every tenant), logged and notified, and
-- makes the snoozed jobs of its waiting effects due now. False: there was no such pause.
SELECT reckon_connector_resume(@connector::text, @tenant_id::text, @actor::text, @reason::text)::boolean AS resumed;

-- name: ConnectorPauses :many
-- Every operator's pause, by connector and tenant.
SELECT * FROM reckon_connector_pauses ORDER BY connector, tenant_id;
