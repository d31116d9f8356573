// Package effects is Reckon's core: recording calls to the outside world as effect rows in the
// caller's transaction (the outbox), dispatching them under a fenced lease, reconciling ambiguous
// outcomes with status checks, and compensating what should be undone.
//
// The state machine (PENDING, CONFIRMED, FAILED, UNKNOWN, STUCK) is enforced by the database
// itself: see db/migrations/0001_effects.up.sql and DESIGN.md section 2. The Go API (Connector,
// Registry, Spec, EnqueueTx, the dispatch and reconcile workers) arrives with the effects engine.
package effects
