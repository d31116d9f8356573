// Package saga runs durable multi-step effects: ordered steps, each an effect with a compensation;
// when a step fails, the confirmed steps are compensated in reverse order (docs/design.md, "Sagas").
// It builds on package effects.
//
// # Basics
//
// Register a Definition — a name and ordered Steps — with a Client. Each Step builds its effect's
// spec from the saga's input and the results of the steps before it (Input), and names its
// compensation: UndoByConnector (the connector's own Compensate, through effects' compensation
// mechanism), UndoWith (an effect of its own, e.g. a refund) or NoUndo.
//
// StartTx records the saga and its first step's effect in the caller's transaction. From then on
// the saga advances inside effects' settle hook (the saga client is a plugin of the effects client, effects.Config.Plugins; owner "saga"): the
// transaction that makes a step's effect CONFIRMED also enqueues the next step (or completes the
// saga); the one that makes it FAILED turns the saga COMPENSATING and enqueues the compensation of
// the last confirmed step; each confirmed compensation enqueues the one before it, until the saga
// is COMPENSATED. So a saga survives any crash: its state only ever changes together with the
// effect transition that caused it, and the keys of its effects are derived from the saga's id
// and the step's index (StepKey, CompensationKey), so a redo never creates a second step.
//
// # Ambiguity and operators
//
// A step whose outcome is UNKNOWN holds the saga (RUNNING) while effects reconciles it. A step or
// compensation effect that becomes STUCK makes the saga STUCK; the operator resolves that effect
// (effects.Client.Resolve, POST /v1/effects/{id}/resolve) and the saga moves on in the same
// transaction. A compensation that ends FAILED is tried again with a new effect, after
// Definition.CompensationBackoff, up to Definition.CompensationAttempts; then the saga is STUCK
// and Client.Resolve lets an operator retry it (RetryCompensation) or declare it done by other
// means (MarkCompensated). Get, List, History and Wait show it all; every state change is in
// reckon_saga_transitions with actor and reason.
//
// # Caveats
//
//   - Every process that runs a reactor for sagas must create the saga Client (which registers the
//     hook) and Register every definition before starting the effects client.
//   - An operator who sends a STUCK effect back to PENDING (effects.Client.Resolve) leaves the
//     saga STUCK until that effect settles again; then it moves on as usual.
//   - An operator's CONFIRMED carries no result; a later step that needs that result fails to build
//     and the saga compensates.
//   - Changing a definition's number of steps while sagas of it are unfinished is refused by those
//     sagas (their effects are retried until the definition matches again): add a new name instead.
package saga
