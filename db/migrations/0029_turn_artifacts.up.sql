-- Artifacts of a turn group (docs/turns.md, "Artifacts"): what a turn handler computed and stored
-- so that a later turn of the same group — one that supersedes it, or a retry — can take it
-- instead of computing it again. One row per (turn_group, name); saving again replaces it.
--
-- A row is written at once, in a transaction of its own on the session mutex's connection, not
-- with the turn's commit: a superseded turn never commits, and what it computed is exactly what
-- the superseding turn should reuse.
--
-- Reuse rules (applied by package turns, which writes artifact.reused / artifact.invalidated to
-- reckon_events with reckon_emit in the same transaction as the read):
--   ALWAYS_SAFE   reused when the input fingerprint is the same
--   CONDITIONAL   reused when the input and the dependency fingerprints are the same
--   NEVER         never reused (kept for the handler to see, e.g. over HTTP)
CREATE TABLE reckon_turn_artifacts (
    turn_group             uuid NOT NULL,
    name                   text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 200),
    data                   jsonb NOT NULL CHECK (octet_length(data::text) <= 1048576),
    input_fingerprint      text NOT NULL CHECK (octet_length(input_fingerprint) BETWEEN 1 AND 512),
    dependency_fingerprint text NOT NULL DEFAULT '' CHECK (octet_length(dependency_fingerprint) <= 512),
    policy                 text NOT NULL CHECK (policy IN ('ALWAYS_SAFE', 'CONDITIONAL', 'NEVER')),
    -- The turn that saved it, and its session (a turn group belongs to one session).
    turn_id                uuid NOT NULL,
    tenant_id              text NOT NULL,
    session_key            text NOT NULL,
    saved_at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (turn_group, name)
);
