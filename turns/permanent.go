package turns

import (
	"context"
)

// Readier is a Handler that can tell whether it is able to process a session's turns now. Before
// taking a session's turn, the client asks Ready; an error (wrap ErrNotReady to say why) leaves the
// turn untouched, ACCUMULATING with its messages, and its job snoozes for Config.NotReadyDelay and
// asks again. Nothing is dropped and no attempt is spent.
type Readier interface {
	Ready(ctx context.Context, sessionKey string) error
}
