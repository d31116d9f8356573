package effects

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrNotFound: no effect with that id (or idempotency key) for the tenant.
	ErrNotFound = errors.New("effects: effect not found")
	// ErrIdempotencyConflict: the idempotency key is taken by an effect with other args or
	// another connector.
	ErrIdempotencyConflict = errors.New("effects: idempotency key already used with different args")
	// ErrBusinessKeyConflict: the connector deduplicates by business key
	// (Connector.DedupByBusinessKey), and an effect of the tenant that is not FAILED already holds
	// the business key with other args (or another owner). Nothing is enqueued.
	ErrBusinessKeyConflict = errors.New("effects: business key already held by an effect with different args")
	// ErrPruned: the idempotency key belonged to an effect that settled and was then pruned by
	// retention, and its tombstone keeps the key for the dedup window: the enqueue is a late
	// duplicate and nothing is enqueued. errors.As with *PrunedError tells which effect it was.
	// Once the window ends the key is free, and an enqueue with it performs the call again.
	ErrPruned = errors.New("effects: idempotency key belongs to a pruned effect")
	// ErrUnknownConnector: no connector of that name is registered.
	ErrUnknownConnector = errors.New("effects: unknown connector")
	// ErrNotStuck: only a STUCK effect can be resolved by an operator.
	ErrNotStuck = errors.New("effects: effect is not STUCK")
	// ErrNotCancellable: only a PENDING effect that was never attempted and is not in flight can
	// be cancelled.
	ErrNotCancellable = errors.New("effects: effect cannot be cancelled")
	// ErrNotCompensatable: only a CONFIRMED effect whose connector has Compensate can be
	// compensated.
	ErrNotCompensatable = errors.New("effects: effect cannot be compensated")
	// ErrNoSettleHook: the effect is owned (Spec.Owner) and its owner registered no SettleHook
	// in this client (Config.Plugins, OnSettle); the write is refused.
	ErrNoSettleHook = errors.New("effects: no settle hook registered for owner")
	// ErrSchemaNotCurrent: the database lacks Reckon's or River's tables, or some of their
	// migrations: run db.Migrate (or `server migrate up`) first. Start checks; an enqueue that
	// meets a missing table or column says so.
	ErrSchemaNotCurrent = errors.New("effects: the database schema is not current: run db.Migrate (or `server migrate up`) first")
	// ErrPresumedDead: the started client lost its database connection for longer than
	// Config.TakeoverGrace, another reactor took it for dead and handed its running jobs to
	// others, so it stopped its work (Client.Fatal). Restart the process.
	ErrPresumedDead = errors.New("effects: this reactor was taken for dead and its jobs were handed to other reactors")

	// Of Redrive; each leaves the effect as it was.

	// ErrNotFailed: only a FAILED effect can be redriven.
	ErrNotFailed = errors.New("effects: effect is not FAILED")
	// ErrRedriveCompensation: a compensation is not redriven; its original's owner (a saga,
	// an operator) enqueues another one (CompensateOpts.KeySuffix).
	ErrRedriveCompensation = errors.New("effects: a compensation cannot be redriven")
	// ErrRedriveDeclined: the effect FAILED because its confirmation hold was declined or
	// expired; nobody confirmed the call, so a redrive would make it unconfirmed. Enqueue it
	// again to ask again.
	ErrRedriveDeclined = errors.New("effects: an effect whose confirmation was declined or expired cannot be redriven")
	// ErrRedriveOwned: the effect has an owner (Spec.Owner, a saga step's effect), whose settle
	// hook has already acted on the failure in the transaction that recorded it — a saga
	// compensates (or has compensated) when a step fails. The owner has moved on: redriving the
	// step would call it behind the owner's back.
	ErrRedriveOwned = errors.New("effects: an owned effect (a saga step) cannot be redriven: its owner has acted on the failure")
	// ErrRedriveBusinessKeyTaken: the effect's connector deduplicates by business key
	// (Connector.DedupByBusinessKey), and a newer effect that is not FAILED holds the business key
	// now: redriving would make two live effects of one business key.
	ErrRedriveBusinessKeyTaken = errors.New("effects: the business key of the effect is held by another effect")

	// Of confirmations (Config.Confirmation, Client.Confirm, Client.Decline).

	// ErrNotAwaitingConfirmation is the error of a confirmation or a decline of an effect that does not
	// await one (never held, already decided, or no longer PENDING).
	ErrNotAwaitingConfirmation = errors.New("effects: the effect does not await a confirmation")
	// ErrConfirmationRequired is the error of Do for an effect that must be confirmed first: it cannot
	// be performed inline.
	ErrConfirmationRequired = errors.New("effects: the effect requires a confirmation")
	// ErrFourEyes is the error of a confirmation by the actor that enqueued the effect, refused under
	// Config.FourEyes.
	ErrFourEyes = errors.New("effects: the effect's confirmation must come from someone other than the actor that enqueued it")
)

// PrunedError is the ErrPruned of an enqueue (errors.Is(err, ErrPruned)): the effect that held the
// idempotency key, what it settled as and when, and when it was pruned.
type PrunedError struct {
	// IdempotencyKey is the key of the refused spec.
	IdempotencyKey string
	// EffectID is the pruned effect that held the key.
	EffectID uuid.UUID
	// State is what the effect settled as: StateConfirmed or StateFailed.
	State State
	// SettledAt is when it settled, PrunedAt when retention deleted it.
	SettledAt, PrunedAt time.Time
	// ExpiresAt ends the dedup window: from then on the key is free again.
	ExpiresAt time.Time
}

// Error names the key, the pruned effect, how and when it settled, and until when the key is kept.
func (e *PrunedError) Error() string {
	return fmt.Sprintf("effects: idempotency key %q belonged to effect %s, which settled %s at %s and was pruned at %s (the key is kept until %s)",
		e.IdempotencyKey, e.EffectID, e.State, e.SettledAt.UTC().Format(time.RFC3339), e.PrunedAt.UTC().Format(time.RFC3339),
		e.ExpiresAt.UTC().Format(time.RFC3339))
}

// Is makes a *PrunedError match ErrPruned.
func (e *PrunedError) Is(target error) bool { return target == ErrPruned }

// Sentinel errors of callbacks. Test with errors.Is.
var (
	// ErrUnknownCorrelation: no effect has that correlation id (for the tenant), or it does not
	// name the effect the callback is for (CallbackOpts.EffectID). Nothing is recorded.
	ErrUnknownCorrelation = errors.New("effects: unknown correlation id")
	// ErrNotAwaitingCallback: the effect does not await a callback — it was never accepted
	// upstream and has no attempt in flight (docs/async.md) — so a callback cannot settle it. The
	// callback is recorded in the effect's audit trail; nothing else changes.
	ErrNotAwaitingCallback = errors.New("effects: effect is not awaiting a callback")
	// ErrCallbackConflict: the effect is already CONFIRMED or FAILED with another outcome than
	// the callback reports. The callback is recorded in the effect's audit trail; nothing else
	// changes.
	ErrCallbackConflict = errors.New("effects: callback conflicts with the recorded outcome")
	// ErrCallbackStuck: the effect is STUCK, which only an operator resolves. The callback is
	// recorded in its audit trail for the operator to see.
	ErrCallbackStuck = errors.New("effects: callback for a STUCK effect")
)

// Sentinel errors of runs. Test with errors.Is.
var (
	// ErrRunNotFound: no run with that id (for that tenant).
	ErrRunNotFound = errors.New("effects: run not found")
	// ErrRunMaxSteps: enqueueing would take the run past its MaxSteps; nothing was enqueued.
	ErrRunMaxSteps = errors.New("effects: run reached its maximum number of steps")
	// ErrRunMaxFailures: the run's last MaxConsecutiveFailures effects failed; nothing was
	// enqueued.
	ErrRunMaxFailures = errors.New("effects: run reached its maximum number of consecutive failures")
	// ErrRunCancelled: the run was cancelled; nothing was enqueued.
	ErrRunCancelled = errors.New("effects: run cancelled")
)

// errFencedOut: a fenced write found the effect moved on — another writer decided first — and
// wrote nothing. It is the one signal of being fenced out: it rolls back the writer's transaction,
// and the writer keeps what it saw in the audit trail only (observeFencedOut).
var errFencedOut = errors.New("effects: fenced out")

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a definite failure: trying again cannot help. A connector returns it when
// the upstream refused and will refuse again, and the call did not take effect: the effect becomes
// FAILED without a retry. A turn handler (package turns) returns it when the application refuses
// the turn's messages: the turn becomes FAILED at once. The error's message is err's.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryableError marks a failure that provably did not take effect (connection refused, 429 or
// 503 before processing). The effect stays PENDING and is tried again after After, or after the
// connector's Backoff when After is zero, until its attempts run out (then FAILED).
type RetryableError struct {
	Err   error
	After time.Duration
}

// Error is Err's message after "retryable: ".
func (e *RetryableError) Error() string { return "retryable: " + e.Err.Error() }

// Unwrap returns Err, for errors.Is and errors.As.
func (e *RetryableError) Unwrap() error { return e.Err }

// Retryable marks err as retryable with the connector's backoff.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err}
}

// RetryAfter marks err as retryable after d (e.g. from a Retry-After header).
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err, After: d}
}

// IsRetryable reports whether err was marked with Retryable or RetryAfter.
func IsRetryable(err error) bool {
	var r *RetryableError
	return errors.As(err, &r)
}
