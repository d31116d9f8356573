DROP VIEW IF EXISTS reckon_audit_stuck;
DROP VIEW IF EXISTS reckon_audit_effects;
DROP VIEW IF EXISTS reckon_audit_transitions;
DROP TABLE IF EXISTS reckon_idempotency_keys;
DROP TABLE IF EXISTS reckon_api_tokens;
DROP TABLE IF EXISTS reckon_tenants;
