package turns

import (
	"context"
	"errors"
)

// permanentError marks a handler error after which the turn must not be attempted again.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps a handler error to say that attempting the turn again cannot help (the
// application refused its messages): the turn ends FAILED at once with err as its status reason,
// nothing it staged is committed, and the run returns ErrTurnFailed. Other handler errors are
// attempted again, up to Config.MaxAttempts. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was made by Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// Readier is a Handler that can tell whether it is able to process a session's turns now. Before
// taking a session's turn, the client asks Ready; an error (wrap ErrNotReady to say why) leaves the
// turn untouched, ACCUMULATING with its messages, and its job snoozes for Config.NotReadyDelay and
// asks again. Nothing is dropped and no attempt is spent.
type Readier interface {
	Ready(ctx context.Context, sessionKey string) error
}
