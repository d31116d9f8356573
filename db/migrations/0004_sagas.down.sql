DROP TRIGGER IF EXISTS reckon_saga_settled ON reckon_sagas;
DROP FUNCTION IF EXISTS reckon_saga_notify_settled();
DROP TABLE IF EXISTS reckon_saga_transitions;
DROP TABLE IF EXISTS reckon_saga_steps;
DROP TABLE IF EXISTS reckon_sagas;
DROP TYPE IF EXISTS reckon_saga_step_state;
DROP TYPE IF EXISTS reckon_saga_state;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS owner;
