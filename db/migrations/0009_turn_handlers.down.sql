ALTER TABLE reckon_messages DROP COLUMN IF EXISTS sent_at;
