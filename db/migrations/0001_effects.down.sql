DROP TABLE IF EXISTS reckon_effect_transitions;
DROP TABLE IF EXISTS reckon_effects;
DROP FUNCTION IF EXISTS reckon_effect_transitions_append_only();
DROP FUNCTION IF EXISTS reckon_effect_transition();
DROP FUNCTION IF EXISTS reckon_effect_transition_allowed(reckon_effect_state, reckon_effect_state);
DROP TYPE IF EXISTS reckon_effect_policy;
DROP TYPE IF EXISTS reckon_effect_state;
