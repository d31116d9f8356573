-- The event stream goes with everything it held; effect transitions lose their transaction ids.
DROP TRIGGER reckon_run_event ON reckon_runs;
DROP FUNCTION reckon_run_event();
DROP TRIGGER reckon_message_event ON reckon_messages;
DROP FUNCTION reckon_message_event();
DROP TRIGGER reckon_turn_decision_event ON reckon_turn_decisions;
DROP FUNCTION reckon_turn_decision_event();
DROP TRIGGER reckon_turn_event ON reckon_turns;
DROP FUNCTION reckon_turn_event();
DROP TRIGGER reckon_saga_transition_event ON reckon_saga_transitions;
DROP FUNCTION reckon_saga_transition_event();
DROP TRIGGER IF EXISTS reckon_dispatch_event ON river_job; -- 0032 creates it (before that split, 0027 did)
DROP FUNCTION reckon_dispatch_event();
DROP TRIGGER reckon_effect_progress_event ON reckon_effects;
DROP FUNCTION reckon_effect_progress_event();

DROP VIEW reckon_event_log;
DROP TRIGGER reckon_effect_leased_insert_event ON reckon_effects;
DROP FUNCTION reckon_effect_leased_insert_event();

DROP FUNCTION reckon_emit(text, text, text, uuid, uuid, uuid, text, jsonb);
DROP TABLE reckon_events;
DROP TABLE reckon_events_dropped;
DROP INDEX reckon_effect_transitions_position_idx;
ALTER TABLE reckon_effect_transitions DROP COLUMN xid;
DELETE FROM reckon_audit_partitions WHERE parent = 'reckon_events';
DELETE FROM reckon_audit_drops WHERE parent = 'reckon_events';
ALTER TABLE reckon_audit_partitions DROP CONSTRAINT reckon_audit_partitions_parent_check;
ALTER TABLE reckon_audit_partitions ADD CONSTRAINT reckon_audit_partitions_parent_check
    CHECK (parent IN ('reckon_effect_transitions', 'reckon_saga_transitions', 'reckon_definition_changes'));
