// Package effects makes calls to the outside world safe: a refund, a wire, an email is recorded as
// an effect row in the caller's own transaction (the outbox) and performed by reactors that never
// call twice what must not be called twice.
//
// # Basics
//
// Register a Connector per kind of call, create a Client, and enqueue effects with EnqueueTx in
// the transaction that changes your data. A process that calls Start is a reactor: River workers
// dispatch each effect with the connector's timeout and its idempotency key, and record the
// outcome:
//
//   - success → CONFIRMED; Permanent(err) → FAILED; Retryable(err) → PENDING, tried again with
//     backoff until MaxAttempts (then FAILED);
//   - anything else — a timeout, a dropped connection, a 500 — → UNKNOWN, and reconciliation asks
//     the connector's StatusCheck: present → CONFIRMED, absent → dispatched again, duplicate →
//     CONFIRMED plus a compensation per extra, inconclusive → asked again, then STUCK;
//   - without a status check, a retry-safe (idempotent) effect is dispatched again with the same
//     key; any other becomes STUCK for an operator to Resolve.
//
// The state machine (docs/design.md) is enforced by the database, and every transition is
// in reckon_effect_transitions with its actor and reason. FAILED is final for automation; an
// operator may Redrive a FAILED effect (the database allows FAILED → PENDING to an operator
// actor only): it is dispatched again under the same idempotency key with a fresh attempt budget.
//
// # Crash safety
//
// River's fetch of a dispatch job is the durable record of an attempt, committed before the
// connector is called. The outcome is written fenced by that job, together with the job's
// completion, in one transaction. If a reactor dies between the two, its job runs again with
// attempt > 1 — and a non-idempotent effect becomes UNKNOWN instead of being called. Every started
// client holds a liveness lock (Config.LivenessInterval) that Postgres frees when it dies, so the
// other reactors hand a dead one's running jobs back to River within seconds (docs/design.md,
// "Dead reactors"); a worker that hangs in a live reactor is left alone, and the sweeper of any
// reactor makes its effect UNKNOWN once it runs past the call timeout plus Config.InFlightMargin.
// A late outcome of a worker presumed dead is refused by the fence and kept in the audit trail
// only.
//
// An effect enqueued on its own (EnqueueTx without ScheduledAt) is written without a dispatch job;
// the claimer of every started client of its queue claims such effects, in one transaction, into
// shared dispatch jobs (Config.ClaimInterval; docs/design.md, "Claiming"). A crash in the claim
// rolls it back, and a claim that committed left jobs any reactor fetches. Effects enqueued
// together (EnqueueManyTx) share a dispatch job from the start. Either way up to
// Config.DispatchBatch effects share a job: River's insert, fetch and completion are then spent
// once per batch, and a lone effect gets a job of its own at once. The worker that fetches
// a batch calls its effects concurrently, each under its own timeout, and writes each outcome as
// it comes, fenced by the job as above; a crash leaves the batch's unrecorded effects to the same
// recovery. An effect of a batch that must wait (a retry, a connector this reactor lacks) is
// handed to a job of its own, and the batch job completes once every effect is settled or handed
// on. Up to Config.Workers × Config.DispatchBatch calls may be in flight.
//
// Create the pool with db.ConfigurePool: it makes pgx encode uuids directly (without it they
// work, through a slower text round trip).
//
// # Settle hooks
//
// A component built on effects (package saga) owns its effects: Spec.Owner names it, and the
// hook it registers as a plugin (Config.Plugins, PluginHost.OnSettle) runs inside the transaction that makes an owned effect
// CONFIRMED, FAILED or STUCK — by dispatch, reconciliation, Do, Cancel or an operator's Resolve —
// so that it can enqueue what comes next atomically. A hook error rolls the transition back; an
// owner without a hook in the process is refused (ErrNoSettleHook), never skipped. Owned outcomes
// are written one transaction each, not by group commit.
//
// # Async effects
//
// A Dispatch may answer Accepted: the upstream will report the outcome later. The effect stays
// PENDING, awaiting Client.Callback under its self-routing Call.CorrelationID "{run}:{effect id}",
// until a River job scheduled at its deadline makes it UNKNOWN (soft timeout; a late callback
// still resolves it) or, with a hard timeout, cancels it upstream. Effects of one tenant sharing
// Spec.RunID form a run (run ids are per tenant): WaitRun is its completion gate, CancelRun stops
// it, StartRun sets its guardrails (max steps, max consecutive failures) and GetRun shows its
// status. See docs/async.md.
//
// # Tracing
//
// With an OpenTelemetry SDK installed (Config.TracerProvider, default the global provider, which
// records nothing until one is), EnqueueTx is a span, reckon.enqueue, child of the caller's, and
// its trace context is stored on the effect's row. Everything done for the effect later — the
// River job's span, reckon.dispatch and the connector's call (HTTP connectors send traceparent
// upstream), reconciliation, compensation, callback, deadline, an operator's decision, a saga's
// next step — is a span in that trace, in whichever process and however late. Config.RiverMiddleware
// adds River middleware of your own. See docs/design.md, "Tracing".
//
// # Confirmation holds and limits
//
// An effect that must not go out before a person says so — Connector.RequiresConfirmation,
// Spec.RequireConfirmation, or Config.RequireIrreversibleConfirmation for every irreversible
// connector — is recorded as usual but held (the database refuses it a job) until ConfirmTx;
// DeclineTx fails it, and a ConfirmationTTL expires it. See docs/design.md, "Confirmation holds".
//
// A Connector's Limit bounds its calls across every reactor on the database: a rate with a burst,
// a cap on calls in flight, a circuit breaker, optionally per tenant; Client.SetLimit replaces it
// at run time. An effect held back waits without spending an attempt. An upstream's Retry-After
// (RetryAfter) pauses the connector for every reactor, with or without a limit. See
// docs/design.md, "Limits".
//
// # Caveats
//
//   - Send Call.IdempotencyKey upstream. Connector calls must respect their context.
//   - Go's net/http replays a POST that carries an Idempotency-Key header on a broken keep-alive
//     connection; set Request.GetBody to nil in non-idempotent connectors to forbid that.
//   - Compensate must be idempotent on the compensation's own key: compensations are retried
//     until confirmed.
package effects
