package cli

import (
	"context"
	"time"
)

// Every calls fn every interval until ctx ends, the next call an interval after the previous one
// returned, and at once whenever wake fires (nil: never). It does not call fn at start: a caller
// that wants a first run now (a sync at start) makes it itself. fn handles its own errors (logs
// them); a failed run does not stop the next.
func Every(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func(context.Context)) {
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-wake:
			timer.Stop()
		}
		fn(ctx)
		timer.Reset(interval)
	}
}
