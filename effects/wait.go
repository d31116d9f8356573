package effects

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// settledChannel is the channel the database notifies with the ids (comma-separated) of the
// effects that have just become CONFIRMED, FAILED or STUCK (migration 0002).
const settledChannel = "reckon_effect_settled"

// Wait returns the effect once it is settled — CONFIRMED, FAILED or STUCK — or ctx's error. It
// listens for the database's notification rather than polling; one connection serves all the
// Waits of a Client.
func (c *Client) Wait(ctx context.Context, id uuid.UUID) (*Effect, error) {
	ch, unsubscribe, err := c.notifier.subscribe(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unsubscribe()
	// A safety net in case a notification is lost (the listener reconnecting): look again now
	// and then.
	recheck := time.NewTicker(5 * time.Second)
	defer recheck.Stop()
	for {
		effect, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if effect.State.Settled() {
			return effect, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		case <-recheck.C:
		}
	}
}

// notifier holds one connection that LISTENs on settledChannel and wakes the waiters of each
// notified effect. It starts with the first subscription and reconnects after errors.
type notifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu      sync.Mutex
	waiters map[uuid.UUID]map[chan struct{}]struct{}
	ready   chan struct{} // closed once LISTEN is in place
	cancel  context.CancelFunc
	done    chan struct{}
}

func newNotifier(pool *pgxpool.Pool, logger *slog.Logger) *notifier {
	return &notifier{pool: pool, logger: logger, waiters: map[uuid.UUID]map[chan struct{}]struct{}{}}
}

// subscribe registers interest in id and returns once the listener is in place, so that no
// notification after the call is missed.
func (n *notifier) subscribe(ctx context.Context, id uuid.UUID) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	unsubscribe, err := n.subscribeTo(ctx, id, ch)
	if err != nil {
		return nil, nil, err
	}
	return ch, unsubscribe, nil
}

// subscribeTo is subscribe with the caller's channel (buffered), which several subscriptions may
// share: the completion gate wakes on any effect of its run.
func (n *notifier) subscribeTo(ctx context.Context, id uuid.UUID, ch chan struct{}) (func(), error) {
	n.mu.Lock()
	if n.waiters[id] == nil {
		n.waiters[id] = map[chan struct{}]struct{}{}
	}
	n.waiters[id][ch] = struct{}{}
	if n.done == nil {
		listenCtx, cancel := context.WithCancel(context.Background())
		n.cancel, n.done, n.ready = cancel, make(chan struct{}), make(chan struct{})
		go n.run(listenCtx, n.ready, n.done)
	}
	ready := n.ready
	n.mu.Unlock()

	unsubscribe := func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.waiters[id], ch)
		if len(n.waiters[id]) == 0 {
			delete(n.waiters, id)
		}
	}
	select {
	case <-ready:
		return unsubscribe, nil
	case <-ctx.Done():
		unsubscribe()
		return nil, ctx.Err()
	}
}

func (n *notifier) run(ctx context.Context, ready, done chan struct{}) {
	defer close(done)
	readyOnce := sync.OnceFunc(func() { close(ready) })
	for ctx.Err() == nil {
		err := n.listen(ctx, readyOnce)
		if ctx.Err() != nil {
			return
		}
		n.logger.Warn("effects: settled-effect listener failed; reconnecting", slog.String("error", err.Error()))
		n.wakeAll() // waiters look again themselves
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (n *notifier) listen(ctx context.Context, ready func()) error {
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries a LISTEN: close it instead of returning it to the pool.
	defer func() { _ = conn.Hijack().Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+settledChannel); err != nil {
		return err
	}
	ready()
	n.wakeAll() // anything settled while reconnecting
	for {
		notification, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for _, field := range strings.Split(notification.Payload, ",") {
			if id, err := uuid.Parse(field); err == nil {
				n.wake(id)
			}
		}
	}
}

func (n *notifier) wake(id uuid.UUID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, chans := range n.waiters {
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (n *notifier) stop() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel, n.done = nil, nil
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
