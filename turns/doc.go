// Package turns serializes each conversation session with a Postgres advisory lock and groups
// inbound messages into logical turns that commit their mutations and effects atomically
// (docs/design.md, "Turns"). It builds on package effects.
//
// # Basics
//
// A session is "tenant:agent:interlocutor:channel" (SessionKey). Submit records an inbound message
// in the inbox (reckon_messages) and adds it to the session's ACCUMULATING turn (reckon_turns),
// scheduling a River job for when the channel's aggregation window after the last message closes
// (ChannelPolicy: off, fixed, or adaptive between a minimum and a maximum; DefaultPolicies are
// the per-channel defaults). The job acquires the session mutex (Mutex: a session-level
// pg_advisory_lock on a dedicated pooled connection), moves the turn to PROCESSING and calls the
// Handler with a Turn.
//
// The handler stages its database mutations (Turn.Stage) and effects (Turn.Enqueue, keyed by the
// turn group and a journal position, Turn.Position). Returning nil commits them on the mutex's own
// connection in one transaction together with the turn's move to COMPLETE — all of it or none of
// it — and then releases the mutex.
//
// Before anything irreversible the handler calls Turn.BeforeIrreversible: if messages arrived
// meanwhile, the Decider (Config.Decider, else the conservative DefaultDecision) chooses
// SUPERSEDE (the turn stops; the next turn takes all messages in the same turn group), ABSORB,
// QUEUE or FORCE_COMPLETE. Every decision is recorded in reckon_turn_decisions and counted in
// reckon_turn_decisions_total.
//
// Artifacts: what a handler computed can outlive its turn. Turn.SaveArtifact stores an Artifact
// for the turn group at once (not with the commit), with an input fingerprint, a dependency
// fingerprint (Versions.Fingerprint of a version snapshot the application takes) and a
// ReusePolicy; Turn.Artifact in a later turn of the group — the one that superseded it, or a
// retry — returns it instead of a recomputation when the fingerprints allow (ALWAYS_SAFE: the
// same input; CONDITIONAL: the same input and dependencies; NEVER: never). Lookups write the
// events artifact.reused and artifact.invalidated and are counted in reckon_turn_artifacts_total.
//
// Wiring: create the Client and pass it in effects.Config.Plugins; a started effects client (a
// reactor) then runs the turns. RunTurn runs a session's turn at once, without River.
//
// # Failures
//
//   - A handler or commit error commits nothing and leaves the turn PROCESSING; it is taken over
//     (a new attempt of its messages in the same turn group) by the session's next run, by the
//     River retry of its job (which keeps running the session while the retry turn it led to is
//     unfinished), or by Recover, which runs every Config.RecoverInterval in each process whose
//     River client runs the turn workers, leader or not, and skips sessions held meanwhile. After
//     Config.MaxAttempts attempts the turn is FAILED and keeps its messages.
//   - If the holder's process dies, its connection closes, Postgres frees the lock at once and
//     rolls back its open commit; the next holder takes the turn over the same way.
//   - Beat idempotency: a message id is recorded once per session, and a set of messages is
//     processed by at most one non-superseded turn (a unique index on the set's digest).
//
// # Caveats
//
//   - The mutex needs session-level advisory locks: not through PgBouncer in transaction mode.
//   - While a turn runs, its handler should use the turn's methods for database work that must be
//     fenced by the lock; other pool connections are not fenced.
//   - The Decider must not call the Turn's methods (it runs while the turn is locked).
//   - Effects done inline with Turn.Do happen even if the turn is later superseded; give them a
//     Position so that the superseding turn finds them instead of doing them again.
//   - Artifacts are saved at once, so a saved artifact stays even when the turn then fails or is
//     superseded; that is their purpose. Save them before BeforeIrreversible: a superseded
//     turn's methods return ErrSuperseded or ErrTurnEnded.
package turns
