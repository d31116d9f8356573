-- Logical turns, the inbox of inbound messages and supersede decisions (docs/turns.md).
-- One session (tenant:agent:interlocutor:channel) processes one logical turn at a time; the
-- session mutex is a Postgres advisory lock (package turns), and the indexes below make the
-- database refuse a second in-flight or accumulating turn for a session as well.

CREATE TYPE reckon_turn_status AS ENUM (
    'ACCUMULATING', -- gathering inbound messages until its aggregation window closes
    'PROCESSING',   -- its handler runs under the session mutex
    'COMMITTING',   -- its commit transaction is running
    'COMPLETE',     -- committed: staged mutations, effects and the turn in one transaction
    'SUPERSEDED',   -- stopped; a later turn of the same turn group took its messages
    'FAILED'        -- its handler or commit failed on every attempt; its messages stay with it
);

CREATE TABLE reckon_turns (
    id                    uuid PRIMARY KEY,
    session_key           text NOT NULL CHECK (session_key <> ''),
    -- 1, 2, 3… per session, in the order the turns were opened.
    seq                   bigint NOT NULL CHECK (seq > 0),
    -- The chain of turns linked by supersede (and retries); scopes effects' idempotency keys.
    turn_group            uuid NOT NULL,
    status                reckon_turn_status NOT NULL,
    channel               text NOT NULL,
    -- The inbox messages of the turn (reckon_messages.id), sorted.
    message_ids           uuid[] NOT NULL DEFAULT '{}',
    -- Beat idempotency: a digest of the sorted message ids, set when processing starts.
    beat_key              text,
    first_at              timestamptz NOT NULL,
    last_at               timestamptz NOT NULL,
    window_ms             integer NOT NULL CHECK (window_ms >= 0),
    -- Why the turn closed: off | timeout | adaptive | retry.
    aggregation_reason    text,
    -- 1 for a first attempt; a retry of a failed or abandoned turn counts on.
    attempt               integer NOT NULL DEFAULT 1 CHECK (attempt > 0),
    commit_point_reached  boolean NOT NULL DEFAULT false,
    side_effects_executed integer NOT NULL DEFAULT 0 CHECK (side_effects_executed >= 0),
    -- Who runs it: the process (client id) and the backend pid of the mutex's connection.
    holder                text,
    holder_pid            integer,
    superseded_by         uuid REFERENCES reckon_turns (id),
    status_reason         text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    started_at            timestamptz,
    completed_at          timestamptz,
    CONSTRAINT reckon_turns_session_seq_uniq UNIQUE (session_key, seq)
);

-- One in-flight turn per session, one accumulating turn per session.
CREATE UNIQUE INDEX reckon_turns_in_flight_uniq ON reckon_turns (session_key)
    WHERE status IN ('PROCESSING', 'COMMITTING');
CREATE UNIQUE INDEX reckon_turns_accumulating_uniq ON reckon_turns (session_key)
    WHERE status = 'ACCUMULATING';
-- Beat idempotency: one processed turn per session and set of messages (a superseded attempt
-- does not count).
CREATE UNIQUE INDEX reckon_turns_beat_uniq ON reckon_turns (session_key, beat_key)
    WHERE beat_key IS NOT NULL AND status <> 'SUPERSEDED';
CREATE INDEX reckon_turns_group_idx ON reckon_turns (turn_group);

-- The inbox: every inbound message of a session, assigned to the turn that takes it.
CREATE TABLE reckon_messages (
    id          uuid PRIMARY KEY,
    session_key text NOT NULL CHECK (session_key <> ''),
    -- The caller's id of the message (e.g. the channel's); a second submit of it is a no-op.
    message_id  text NOT NULL CHECK (message_id <> ''),
    channel     text NOT NULL,
    content     jsonb NOT NULL DEFAULT '{}',
    received_at timestamptz NOT NULL,
    turn_id     uuid REFERENCES reckon_turns (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reckon_messages_message_id_uniq UNIQUE (session_key, message_id)
);

CREATE INDEX reckon_messages_turn_idx ON reckon_messages (turn_id);

-- Every supersede decision a turn took (docs/turns.md): what was decided, why, by whom, and about
-- which newly arrived messages.
CREATE TABLE reckon_turn_decisions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    turn_id     uuid NOT NULL REFERENCES reckon_turns (id),
    session_key text NOT NULL,
    action      text NOT NULL CHECK (action IN ('SUPERSEDE', 'ABSORB', 'QUEUE', 'FORCE_COMPLETE')),
    reason      text NOT NULL DEFAULT '',
    decider     text NOT NULL,
    message_ids uuid[] NOT NULL,
    decided_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reckon_turn_decisions_turn_idx ON reckon_turn_decisions (turn_id);
