package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/internal/service"
)

// The started client's background work is one list of services (internal/service), made by
// NewClient: Start starts them in this order and Stop stops them in reverse, each once.
//
//  1. the limits listener — the limits' view follows the changes of limits, pauses and circuits
//     while River runs and drains;
//  2. liveness — the reactor's lock, registration and heartbeat: held while River starts, drains
//     and stops, so that a draining reactor is not taken for dead;
//  3. the committer — the group commit the dispatch workers hand their outcomes to;
//  4. River — the workers; its Stop drains them (Client.Stop's ctx bounds the drain);
//  5. the sweeper and 6. the shared statistics;
//  7. the claimer — stopped first of effects' own: no new dispatch jobs while the workers drain;
//  8. the plugins' services (PluginHost.AddService), in the order they were added — started last
//     and stopped first: they may insert jobs and enqueue effects, which must stop before River
//     does.
//
// The notification listener (Listen, Wait) is not in the list: a client that is never started
// uses it too, so it starts with its first subscription; Stop ends it once, after every service,
// when nothing started can subscribe anymore. The loader (loader.go) needs no lifecycle: its
// goroutine runs only while workers wait for reads.

// Service is background work a plugin runs while its Client is started (PluginHost.AddService).
type Service interface {
	// Start starts the work and returns once it runs. Its ctx is the one passed to Client.Start: a
	// service that keeps it past Start for its work should drop its cancellation
	// (context.WithoutCancel), which Client.Start treats as a hard stop. An error fails
	// Client.Start, which then stops the services started before, in reverse.
	Start(ctx context.Context) error
	// Stop ends the work and returns once it has ended. It is called once for each successful
	// Start, by Client.Stop (with its ctx) or by a Client.Start that failed later, before the
	// Client's River client stops.
	Stop(ctx context.Context) error
}

// newServices returns the client's own services, in their order (see above).
func (c *Client) newServices() []service.Service {
	services := []service.Service{
		c.limitsService(),
		&livenessService{c: c},
		c.committer,
		service.Func(c.startRiver, c.stopRiver),
		service.NewLoop(c.runSweeper),
	}
	if c.config.StatsInterval >= 0 {
		services = append(services, c.statsService())
	}
	return append(services, c.claimerService())
}

// limitsService makes the limits' view follow the notifications of limitsChannel
// (runLimitListener): it listens, then drops the view, which may have missed changes before.
func (c *Client) limitsService() *service.Loop {
	return service.NewPreparedLoop(func(ctx context.Context) (func(context.Context), error) {
		sub, err := c.Listen(ctx, limitsChannel, limitsKey)
		if err != nil {
			return nil, fmt.Errorf("effects: listen for changes of limits: %w", err)
		}
		c.limits.invalidate()
		return func(ctx context.Context) { c.runLimitListener(ctx, sub) }, nil
	})
}

// claimerService runs the claimer (runClaimer) on its wake-ups. It claims once as it starts, so
// nothing enqueued before it listened waits for a poll.
func (c *Client) claimerService() *service.Loop {
	return service.NewPreparedLoop(func(ctx context.Context) (func(context.Context), error) {
		sub, err := c.Listen(ctx, claimChannel, c.config.Queue)
		if err != nil {
			return nil, fmt.Errorf("effects: listen for effects to claim: %w", err)
		}
		return func(ctx context.Context) { c.runClaimer(ctx, sub) }, nil
	})
}

// statsService computes the parts that are due as it starts, then runs the loop that tries again
// every StatsInterval / statsTries (runStats).
func (c *Client) statsService() *service.Loop {
	return service.NewPreparedLoop(func(ctx context.Context) (func(context.Context), error) {
		c.computeStats(context.WithoutCancel(ctx))
		return c.runStats, nil
	})
}

// startRiver starts the River client. Its ctx is Client.Start's: cancelling it cancels the work in
// flight at once.
func (c *Client) startRiver(ctx context.Context) error {
	if err := c.river.Start(ctx); err != nil {
		return fmt.Errorf("effects: start river: %w", err)
	}
	return nil
}

// stopRiver stops the River client gracefully, and cancels the work in flight if ctx ends first.
func (c *Client) stopRiver(ctx context.Context) error {
	err := c.river.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		c.logger.Warn("reactor: work in flight did not finish in time; cancelling it")
		cancelCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = c.river.StopAndCancel(cancelCtx)
	}
	return err
}
