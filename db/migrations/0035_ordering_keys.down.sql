-- reckon:no-transaction
ALTER TABLE reckon_connectors DROP COLUMN IF EXISTS ordering_key_fields;
DROP TRIGGER IF EXISTS reckon_effect_order_hand_on ON reckon_effects;
DROP FUNCTION IF EXISTS reckon_order_hand_on();
DROP FUNCTION IF EXISTS reckon_order_hand_on_key(text, text);
DROP FUNCTION IF EXISTS reckon_order_lock(text, text);
DROP INDEX CONCURRENTLY IF EXISTS reckon_effects_ordering_idx;
DROP SEQUENCE IF EXISTS reckon_effects_order_seq;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS not_before;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS order_queue;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS order_seq;
ALTER TABLE reckon_effects DROP COLUMN IF EXISTS ordering_key;
