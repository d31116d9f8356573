-- Signed callbacks (docs/async.md): the deployment's key, from which every effect's callback secret
-- is derived, and the signatures already used, so that a callback cannot be replayed.

-- The deployment's callback key. An effect's callback secret is HMAC-SHA256(key, its id): given to
-- the upstream with the dispatch, never stored. One row; reactors and servers read it once and keep
-- it. Whoever can read this row can sign any effect's callback: treat it like a password.
CREATE TABLE reckon_callback_keys (
    id         smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    key        bytea NOT NULL CHECK (octet_length(key) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- 32 bytes from Postgres's strong random source (gen_random_uuid uses pg_strong_random; three
-- version 4 uuids carry 366 random bits, hashed to 256).
INSERT INTO reckon_callback_keys (key)
VALUES (sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')));

-- The signatures (the v1 MAC of Reckon-Signature) of the signed callbacks that were processed,
-- written in the callback's own transaction: a callback that rolls back leaves none and may be sent
-- again; a second one with the same signature is refused (409 callback_replayed). A signature is
-- accepted only within five minutes of its timestamp, so a row is needed until then (expires_at);
-- callbacks prune expired rows as they go.
CREATE TABLE reckon_callback_signatures (
    signature  bytea PRIMARY KEY CHECK (octet_length(signature) = 32),
    effect_id  uuid NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX reckon_callback_signatures_expires_idx ON reckon_callback_signatures (expires_at);
