package cli

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx ends, the next call an interval after the previous one
// returned. It does not call fn at once: a caller that wants a first run now (a sync at start)
// makes it itself. fn handles its own errors (logs them); a failed run does not stop the next.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		fn(ctx)
		timer.Reset(interval)
	}
}
