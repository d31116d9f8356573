package effects

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// settledChannel is the channel the database notifies with the ids (comma-separated) of the
// effects that have just become CONFIRMED, FAILED or STUCK (migration 0002).
const settledChannel = "reckon_effect_settled"

// waitRecheckEvery is how often a waiter (Wait, WaitRun) reads again what it waits for without
// a notification: a safety net for a notification lost while the listener reconnects, seldom
// enough to cost the database little next to the notifications, often enough that such a waiter
// is late by seconds, not stuck.
const waitRecheckEvery = 5 * time.Second

// Wait returns the effect once it is settled — CONFIRMED, FAILED or STUCK — or ctx's error. It
// listens for the database's notification rather than polling; one connection serves all the
// Waits of a Client (see Listen).
func (c *Client) Wait(ctx context.Context, id uuid.UUID) (*Effect, error) {
	ch, unsubscribe, err := c.notifier.subscribe(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unsubscribe()
	recheck := time.NewTicker(waitRecheckEvery)
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

// Subscription is interest in the notifications of one Postgres channel that name one key (see
// Client.Listen).
type Subscription struct {
	// C receives a value when a notification on the channel names the key, and when the client's
	// listening connection has been replaced after an error (a notification may have been missed
	// meanwhile). Notifications that arrive before C is read coalesce into one value. C is never
	// closed.
	C <-chan struct{}

	once        sync.Once
	unsubscribe func()
}

// Close ends the subscription. It may be called more than once.
func (s *Subscription) Close() {
	s.once.Do(s.unsubscribe)
}

// Listen subscribes to the notifications the database sends on channel (NOTIFY, pg_notify) whose
// payload — one key, or several separated by commas — names key; with key "", to every
// notification on channel. It returns once the client
// listens on channel, so that every notification committed after Listen returns reaches the
// subscription: look at the state you wait for after Listen, then wait on Subscription.C.
//
// One connection, taken from the pool with the first subscription and closed by Stop, listens on
// every channel the client's subscribers name (Wait, WaitRun and sagas' Wait use it too): a
// subscription holds no connection of its own. The listener reconnects after an error, waking
// every subscription, so a waiter should still look again now and then. Errors: ctx's, when it
// ends before the listener is in place (a database that cannot be reached); nothing to close then.
func (c *Client) Listen(ctx context.Context, channel, key string) (*Subscription, error) {
	ch := make(chan struct{}, 1)
	unsubscribe, err := c.notifier.subscribeKey(ctx, notifyKey{channel: channel, key: key}, ch)
	if err != nil {
		return nil, err
	}
	return &Subscription{C: ch, unsubscribe: unsubscribe}, nil
}

// notifyKey is what a waiter waits for: a notification on channel whose payload names key.
type notifyKey struct {
	channel, key string
}

// notifier holds one connection that LISTENs on every channel its waiters name and wakes the
// waiters of each notified key. It starts with the first subscription, LISTENs on a new channel
// as soon as one is asked for, and reconnects after errors.
type notifier struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu       sync.Mutex
	waiters  map[notifyKey]map[chan struct{}]struct{}
	channels map[string]chan struct{} // every channel asked for → closed once LISTENed to
	// interrupt ends the listener's wait for a notification, so that it LISTENs on a new
	// channel; nil while the listener is not waiting.
	interrupt context.CancelFunc
	cancel    context.CancelFunc
	done      chan struct{}
}

func newNotifier(pool *pgxpool.Pool, logger *slog.Logger) *notifier {
	return &notifier{
		pool: pool, logger: logger,
		waiters: map[notifyKey]map[chan struct{}]struct{}{}, channels: map[string]chan struct{}{},
	}
}

// subscribe registers interest in effect id and returns once the listener is in place, so that
// no notification after the call is missed.
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
	return n.subscribeKey(ctx, notifyKey{channel: settledChannel, key: id.String()}, ch)
}

// subscribeKey registers ch for the notifications of k and returns once the listener LISTENs on
// k's channel.
func (n *notifier) subscribeKey(ctx context.Context, k notifyKey, ch chan struct{}) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err // ended already: start no listener for it
	}
	n.mu.Lock()
	if n.waiters[k] == nil {
		n.waiters[k] = map[chan struct{}]struct{}{}
	}
	n.waiters[k][ch] = struct{}{}
	ready, ok := n.channels[k.channel]
	if !ok {
		ready = make(chan struct{})
		n.channels[k.channel] = ready
		if n.interrupt != nil {
			n.interrupt()
		}
	}
	if n.done == nil {
		listenCtx, cancel := context.WithCancel(context.Background())
		n.cancel, n.done = cancel, make(chan struct{})
		go n.run(listenCtx, n.done)
	}
	n.mu.Unlock()

	unsubscribe := func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.waiters[k], ch)
		if len(n.waiters[k]) == 0 {
			delete(n.waiters, k)
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

func (n *notifier) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	for reconnect := false; ctx.Err() == nil; reconnect = true {
		err := n.listen(ctx, reconnect)
		if ctx.Err() != nil {
			return
		}
		n.logger.Warn("effects: notification listener failed; reconnecting", slog.String("error", err.Error()))
		n.wakeAll() // waiters look again themselves
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// listen LISTENs, on a connection of its own, on every channel asked for, and wakes the waiters
// of each notification until ctx ends or the connection fails. On a reconnection it first wakes
// every waiter: a notification may have been sent while there was no listener.
func (n *notifier) listen(ctx context.Context, reconnect bool) error {
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries LISTENs: close it instead of returning it to the pool.
	defer func() { _ = conn.Hijack().Close(context.Background()) }()
	listening := map[string]bool{}
	for {
		n.mu.Lock()
		var todo []string
		for channel := range n.channels {
			if !listening[channel] {
				todo = append(todo, channel)
			}
		}
		n.mu.Unlock()
		for _, channel := range todo {
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
				return err
			}
			listening[channel] = true
		}
		waitCtx, interrupt := context.WithCancel(ctx)
		n.mu.Lock()
		if ctx.Err() != nil { // stopped: the channels are the next listener's
			n.mu.Unlock()
			interrupt()
			return ctx.Err()
		}
		for channel, ready := range n.channels {
			switch {
			case !listening[channel]:
				interrupt() // asked for since: LISTEN on it first
			case !isClosed(ready):
				close(ready)
			}
		}
		n.interrupt = interrupt
		n.mu.Unlock()
		if reconnect {
			n.wakeAll()
			reconnect = false
		}
		err := n.wait(waitCtx, conn.Conn())
		interrupted := waitCtx.Err() != nil
		n.mu.Lock()
		n.interrupt = nil
		n.mu.Unlock()
		interrupt()
		if ctx.Err() != nil || !interrupted || conn.Conn().IsClosed() {
			return err
		}
		// Interrupted for a new channel, on a connection still good: LISTEN on it too.
	}
}

// wait wakes the waiters of each notification conn receives until ctx ends or conn fails.
func (n *notifier) wait(ctx context.Context, conn *pgx.Conn) error {
	for {
		notification, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for _, key := range strings.Split(notification.Payload, ",") {
			n.wake(notifyKey{channel: notification.Channel, key: key})
		}
		if notification.Payload != "" { // the key "" is every notification of the channel
			n.wake(notifyKey{channel: notification.Channel})
		}
	}
}

func isClosed[T any](ch <-chan T) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (n *notifier) wake(k notifyKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[k] {
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

// stop ends the listener and closes its connection. A later subscription starts another.
func (n *notifier) stop() {
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.cancel, n.done = nil, nil
	if cancel != nil {
		// Cancelled under the lock: the listener, which looks at ctx under it, no longer
		// touches channels.
		cancel()
	}
	// The next listener LISTENs afresh: every channel of a remaining waiter is asked for again.
	n.channels = map[string]chan struct{}{}
	for k := range n.waiters {
		if _, ok := n.channels[k.channel]; !ok {
			n.channels[k.channel] = make(chan struct{})
		}
	}
	n.mu.Unlock()
	if done != nil {
		<-done
	}
}
