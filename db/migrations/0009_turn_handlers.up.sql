-- Turns for teams in other languages (POST /v1/sessions/{key}/messages, the reactor's HTTP turn
-- handler): the sender's own time of an inbound message, as the caller gives it ("at"). It is
-- recorded for the handler; aggregation windows run on received_at, the database's clock.
ALTER TABLE reckon_messages ADD COLUMN sent_at timestamptz;
