DROP TABLE IF EXISTS reckon_turn_handlers;
ALTER TABLE reckon_messages DROP COLUMN IF EXISTS sent_at;
