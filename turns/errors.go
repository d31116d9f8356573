package turns

import (
	"errors"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrSessionBusy: the session mutex was not acquired within the timeout; another turn of the
	// session is running. Nothing was changed; try again later.
	ErrSessionBusy = errors.New("turns: session busy")
	// ErrSuperseded: a supersede decision stopped the turn. A handler that gets it from
	// BeforeIrreversible (or Do) returns it: nothing the turn staged is committed, and a later turn
	// of the same turn group processes its messages together with the new ones.
	ErrSuperseded = errors.New("turns: turn superseded")
	// ErrTurnEnded: the turn was used after its handler returned or after it was superseded.
	ErrTurnEnded = errors.New("turns: turn has ended")
	// ErrNoTurn: the session has no accumulating or abandoned turn to process.
	ErrNoTurn = errors.New("turns: nothing to process for the session")
	// ErrNotFound: no turn with that id.
	ErrNotFound = errors.New("turns: turn not found")
	// ErrInvalidSessionKey: a session key is not tenant:agent:interlocutor:channel with four
	// non-empty parts.
	ErrInvalidSessionKey = errors.New("turns: invalid session key")
	// ErrTurnFailed: the turn ended FAILED at once, without further attempts, because its handler
	// returned an effects.Permanent error. Nothing it staged was committed; its messages stay recorded.
	ErrTurnFailed = errors.New("turns: turn failed for good")
	// ErrNotReady: the handler (a Readier) cannot process the session's turns now, e.g. no HTTP
	// turn handler is configured for its tenant. Nothing was changed: the turn stays ACCUMULATING
	// with its messages, and its job tries again after Config.NotReadyDelay.
	ErrNotReady = errors.New("turns: handler not ready for the session")
	// ErrNotAttached: the client was used before an effects client installed it (pass it in
	// effects.Config.Plugins).
	ErrNotAttached = errors.New("turns: client not installed in an effects client (effects.Config.Plugins)")
)
