package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Limit bounds the calls to one connector across every reactor on the database: a rate (a token
// bucket), a cap on calls in flight, and a circuit breaker. An effect held back by it waits — its
// job snoozed, no attempt spent, never FAILED for it — and effects held back are let through in
// enqueue order. Separately from any Limit, an upstream's Retry-After (RetryAfter; an HTTP
// connector's 429 or 503) pauses the connector for every reactor until it passes. The zero Limit
// limits nothing. An operator's limit (Client.SetLimit) replaces the connector's own at run time.
// See docs/design.md, "Limits".
type Limit struct {
	// Rate is how many calls may start per Per; 0: no rate limit. At most 1,000,000.
	Rate int
	// Per is the interval of Rate. Default 1s; 1ms to 1h.
	Per time.Duration
	// Burst is how many calls may start at once after a quiet spell (the bucket's size). Default
	// Rate; at least 1 and at most 1,000,000 with a Rate.
	Burst int
	// MaxInFlight is how many calls may be in flight at once; 0: no cap. At most 1,000,000. A
	// call whose reactor died holds its place until its timeout plus Config.InFlightMargin.
	MaxInFlight int
	// PerTenant gives every tenant a budget of its own of these numbers instead of one shared by
	// all (the circuit and the pauses are per tenant too).
	PerTenant bool
	// BreakAfter opens the connector's circuit after that many consecutive calls failed in a way
	// that may be the upstream's (a retryable failure or an unknown outcome, timeouts included;
	// a permanent failure is an answer): no call goes out for BreakFor, then one probe call, whose
	// success closes the circuit and whose failure opens it again. 0: no circuit breaker. At most
	// 1,000,000.
	BreakAfter int
	// BreakFor is how long an open circuit stays open. Default 30s; 1s to 1h.
	BreakFor time.Duration
}

const (
	maxLimitCount   = 1_000_000
	maxLimitPer     = time.Hour
	defaultBreakFor = 30 * time.Second
	// maxRetryAfterPause caps the pause an upstream's Retry-After sets.
	maxRetryAfterPause = time.Hour
)

// LimitError is a Limit field out of range: Field is its name in Go ("Rate", "Per", "Burst",
// "MaxInFlight", "BreakAfter", "BreakFor"), for callers to name it in their own terms.
type LimitError struct {
	Field   string
	Problem string // e.g. "-1 out of range (0 to 1000000)"
}

// Error names the field and its problem, as in "limit Rate -1 out of range (0 to 1000000)".
func (e *LimitError) Error() string { return "limit " + e.Field + " " + e.Problem }

// WithDefaults returns l with its defaults filled in (Per, Burst, BreakFor), or a *LimitError
// naming the first field out of range.
func (l Limit) WithDefaults() (Limit, error) {
	for _, f := range []struct {
		name  string
		value int
	}{{"Rate", l.Rate}, {"Burst", l.Burst}, {"MaxInFlight", l.MaxInFlight}, {"BreakAfter", l.BreakAfter}} {
		if f.value < 0 || f.value > maxLimitCount {
			return l, &LimitError{Field: f.name, Problem: fmt.Sprintf("%d out of range (0 to %d)", f.value, maxLimitCount)}
		}
	}
	switch {
	case l.Per == 0:
		l.Per = time.Second
	case l.Per < time.Millisecond || l.Per > maxLimitPer:
		return l, &LimitError{Field: "Per", Problem: fmt.Sprintf("%v out of range (1ms to %v)", l.Per, maxLimitPer)}
	}
	if l.Burst == 0 {
		l.Burst = l.Rate
	}
	switch {
	case l.BreakFor == 0:
		l.BreakFor = defaultBreakFor
	case l.BreakFor < time.Second || l.BreakFor > maxLimitPer:
		return l, &LimitError{Field: "BreakFor", Problem: fmt.Sprintf("%v out of range (1s to %v)", l.BreakFor, maxLimitPer)}
	}
	return l, nil
}

// unlimited reports whether l limits nothing: no rate, no cap, no circuit breaker.
func (l Limit) unlimited() bool { return l.Rate == 0 && l.MaxInFlight == 0 && l.BreakAfter == 0 }

// String describes l, e.g. "20/1s burst 20, 5 in flight, per tenant, breaks after 5 for 30s".
func (l Limit) String() string {
	if l.unlimited() {
		return "unlimited"
	}
	s := ""
	add := func(part string) {
		if s != "" {
			s += ", "
		}
		s += part
	}
	if l.Rate > 0 {
		add(fmt.Sprintf("%d/%v burst %d", l.Rate, l.Per, l.Burst))
	}
	if l.MaxInFlight > 0 {
		add(fmt.Sprintf("%d in flight", l.MaxInFlight))
	}
	if l.BreakAfter > 0 {
		add(fmt.Sprintf("breaks after %d for %v", l.BreakAfter, l.BreakFor))
	}
	if l.PerTenant {
		add("per tenant")
	}
	return s
}

// limitsChannel is the channel on which changes of limits, pauses and circuits are notified.
const (
	limitsChannel = "reckon_limits"
	limitsKey     = "limits"
)

// limitViewTTL is how long a process uses its view of the operators' limits and of the paused and
// open connectors before it reads them again; a started client also reads them again on every
// notification of limitsChannel.
const limitViewTTL = 5 * time.Second

// limitGraceExtra is added to River's poll interval to make how late a held-back effect may come
// back before the effects behind it stop waiting for it.
const limitGraceExtra = 5 * time.Second

// slotsChannel is the channel on which a call that ends names the effects at the head of its cap's
// queue (comma-separated ids), as many as places are free: it has handed each a place to claim
// (claimPlace), or, with a rate, wakes them to ask again (reckon_limit_release, migration 0030).
const slotsChannel = "reckon_limit_slots"

// riverSchedulerInterval is River's scheduler's interval (its default, which Reckon keeps): a job
// snoozed for longer is made available again only by the scheduler, one snoozed for up to that
// stays available and is fetched once due. A held-back effect never snoozes for longer.
const riverSchedulerInterval = 5 * time.Second

// sharedAskWait bounds how long an effect of a batch job waits for its turn to ask its limits.
const sharedAskWait = 100 * time.Millisecond

// maxInlineBudget bounds how long one run of a dispatch job waits in its worker for its limits.
const maxInlineBudget = 10 * time.Second

// limiter is a process's view of what limits apply: the operators' limits and the limit keys that
// are paused or whose circuit is not closed. Dispatch asks the database (reckon_limit_acquire)
// only for a connector that has a limit or is throttled: an unlimited connector costs a read of
// the current view, without a lock. One caller at a time reads a stale view again (invalidated
// by a notification, or older than limitViewTTL); the others go on with the one they have
// meanwhile, but while it is invalidated they ask the database, which knows of a pause the
// notification may have been about.
type limiter struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	view    atomic.Pointer[limitView]
	loading sync.Mutex
	// places are the workers that wait for their limits in place (awaitCall).
	places places
	// askers lets one caller of a limit key at a time ask the database (acquireCall).
	askers askers
	// fetches are the times at which River's producers are asked to fetch (fetchAt).
	fetchMu sync.Mutex
	fetches map[time.Time]bool
	// gen counts the invalidations. A view read when it was g is current while it still is: an
	// invalidation during a read (a pause written after the read's query) makes the view that
	// read stores stale at once.
	gen atomic.Uint64
}

// limitView is one reading of the limits; never changed once stored.
type limitView struct {
	// unknown says the view could not be read and no earlier one was: every connector asks the
	// database, which knows its limits.
	unknown   bool
	loadedAt  time.Time
	gen       uint64 // limiter.gen when the read began
	overrides map[string]Limit
	throttled map[string]throttle // by connector
	// pauses are the operators' pauses (pause.go), by connector.
	pauses map[string][]ConnectorPause
}

// throttle is what the view knows of a connector's paused or open limit keys (of every tenant).
type throttle struct {
	pausedUntil time.Time // the latest
	open        bool      // a circuit open or half open
	openUntil   time.Time // the latest; before it no call goes out
}

// limitLoadTimeout bounds a read of the view; limitLoadRetry is how soon a failed read is tried
// again (the callers meanwhile go on with the previous view's contents).
const (
	limitLoadTimeout = 5 * time.Second
	limitLoadRetry   = time.Second
)

func newLimiter(pool *pgxpool.Pool, logger *slog.Logger, workers int) *limiter {
	return &limiter{pool: pool, logger: logger, places: places{size: max(1, workers/2), held: map[*place]struct{}{}}, askers: newAskers()}
}

// limitKeyTenant is the tenant part of the limit key of an effect of tenant: the tenant for a
// limit per tenant, else "" (one key for the connector), as the database keys reckon_limit_state.
func limitKeyTenant(limit Limit, tenant string) string {
	if limit.PerTenant {
		return tenant
	}
	return ""
}

// askers are the turns of a process's callers to ask the database for a grant: one at a time per
// limit key. reckon_limit_acquire serializes the calls of a key on its row, and every caller waiting
// there holds a connection of the pool: a batch of effects held back together, or the waiters woken
// by a freed place, would take every connection from the reactor's other work (its outcomes, its
// River producer). Keys are hashed onto a fixed set of turns, so a process keeps no state per key.
type askers struct {
	turns [64]chan struct{}
}

func newAskers() askers {
	var a askers
	for i := range a.turns {
		a.turns[i] = make(chan struct{}, 1)
	}
	return a
}

// take waits for the turn of the limit key of connector and keyTenant (limitKeyTenant), until
// until (zero: as long as ctx lasts), and returns the function that gives it back; nil when until
// came first, or ctx's error.
func (a *askers) take(ctx context.Context, connector, keyTenant string, until time.Time) (func(), error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(connector))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(keyTenant))
	turn := a.turns[h.Sum32()%uint32(len(a.turns))]
	var timeout <-chan time.Time
	if !until.IsZero() {
		timer := time.NewTimer(time.Until(until))
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-timeout:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// busyWait is how long an effect whose turn to ask did not come in time waits before it asks
// again (spread, so that the ones given up together do not come back together).
func busyWait() time.Duration {
	return time.Duration(float64(250*time.Millisecond) * (0.75 + rand.Float64()/2))
}

// places are the workers of a client that wait for their limits in place: at most size (half of
// the client's workers), so that held-back effects never take every worker from the connectors
// that are not held back. The effects nearest the head of the queue keep them: one that comes
// while they are all taken evicts the waiter enqueued last, if it was enqueued before it; the
// evicted one's job snoozes.
type places struct {
	size int
	mu   sync.Mutex
	held map[*place]struct{}
}

// place is one worker's place: its effect's position in the queue, and evicted, closed when a
// waiter nearer the head takes the place.
type place struct {
	queuedAt time.Time
	effectID uuid.UUID
	evicted  chan struct{}
}

func (p *place) before(q *place) bool {
	if c := p.queuedAt.Compare(q.queuedAt); c != 0 {
		return c < 0
	}
	return p.effectID.String() < q.effectID.String()
}

// take returns a place for effect e, or nil when every place is held by an effect nearer the head.
func (ps *places) take(e limited) *place {
	p := &place{queuedAt: e.queuedAt, effectID: e.effectID, evicted: make(chan struct{})}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.held) >= ps.size {
		var last *place
		for q := range ps.held {
			if last == nil || last.before(q) {
				last = q
			}
		}
		if !p.before(last) {
			return nil
		}
		delete(ps.held, last)
		close(last.evicted)
	}
	ps.held[p] = struct{}{}
	return p
}

// leave gives p back, unless it was evicted.
func (ps *places) leave(p *place) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.held, p)
}

// invalidate makes the next lookup read the view again.
func (l *limiter) invalidate() { l.gen.Add(1) }

// current returns the view, read again first when it is missing, invalidated or older than
// limitViewTTL (by one caller; the others go on with the view they find). It reports whether the
// view is known to be out of date: invalidated since its read began.
func (l *limiter) current(ctx context.Context) (view *limitView, stale bool) {
	v := l.view.Load()
	if v != nil && v.gen == l.gen.Load() && time.Since(v.loadedAt) <= limitViewTTL {
		return v, false
	}
	if v != nil && !l.loading.TryLock() {
		return v, v.gen != l.gen.Load() // another caller is reading it
	}
	if v == nil {
		l.loading.Lock()
	}
	defer l.loading.Unlock()
	if now := l.view.Load(); now != v {
		return now, now.gen != l.gen.Load() // read meanwhile
	}
	// Detached from the caller: a job's deadline or cancellation must not fail the read (and
	// leave the previous contents in use until the next try).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitLoadTimeout)
	defer cancel()
	next := l.load(ctx, v)
	l.view.Store(next)
	return next, next.gen != l.gen.Load()
}

// lookup returns the limit that applies to connector and whether its calls must be granted by
// the database: it has a limit, or one of its keys is paused (by an upstream or an operator) or
// its circuit not closed, or the view is out of date (a notification came while it is read
// again: it may be a pause).
func (l *limiter) lookup(ctx context.Context, connector *Connector) (Limit, bool) {
	v, stale := l.current(ctx)
	limit, ok := v.overrides[connector.Name]
	if !ok {
		limit = connector.Limit
	}
	t := v.throttled[connector.Name]
	return limit, stale || v.unknown || !limit.unlimited() || t.open || time.Now().Before(t.pausedUntil) || len(v.pauses[connector.Name]) > 0
}

// load reads the view. On failure it keeps the previous one's contents, and the view it returns
// is read again after limitLoadRetry.
func (l *limiter) load(ctx context.Context, previous *limitView) *limitView {
	next := &limitView{loadedAt: time.Now(), gen: l.gen.Load()} // before the queries
	failed := func(what string, err error) *limitView {
		l.logger.WarnContext(ctx, "limits: read "+what, slog.String("error", err.Error()))
		next.loadedAt = next.loadedAt.Add(limitLoadRetry - limitViewTTL)
		if previous != nil {
			next.overrides, next.throttled, next.pauses, next.unknown = previous.overrides, previous.throttled, previous.pauses, previous.unknown
		} else {
			next.unknown = true // an operator's limit may apply: never call unlimited on no view
		}
		return next
	}
	q := dbsqlc.New(l.pool)
	rows, err := q.LimitOverrides(ctx)
	if err != nil {
		return failed("the operators' limits", err)
	}
	throttled, err := q.LimitThrottled(ctx)
	if err != nil {
		return failed("paused connectors", err)
	}
	pauses, err := q.ConnectorPauses(ctx)
	if err != nil {
		return failed("the operators' pauses", err)
	}
	next.pauses = map[string][]ConnectorPause{}
	for _, p := range pauses {
		next.pauses[p.Connector] = append(next.pauses[p.Connector], ConnectorPause{
			Connector: p.Connector, TenantID: p.TenantID, PausedBy: p.PausedBy, Reason: p.Reason, PausedAt: p.PausedAt,
		})
	}
	next.overrides = make(map[string]Limit, len(rows))
	for _, r := range rows {
		next.overrides[r.Connector] = limitOfRow(r)
	}
	next.throttled = map[string]throttle{}
	for _, r := range throttled {
		t := next.throttled[r.Connector]
		if r.PausedUntil != nil && r.PausedUntil.After(t.pausedUntil) {
			t.pausedUntil = *r.PausedUntil
		}
		if r.OpenedUntil != nil {
			t.open = true
			if r.OpenedUntil.After(t.openUntil) {
				t.openUntil = *r.OpenedUntil
			}
		}
		next.throttled[r.Connector] = t
	}
	return next
}

// snapshot returns the view's throttled connectors and operators' pauses, for the metrics (not
// to be changed).
func (l *limiter) snapshot(ctx context.Context) (map[string]throttle, map[string][]ConnectorPause) {
	v, _ := l.current(ctx)
	return v.throttled, v.pauses
}

func limitOfRow(r dbsqlc.ReckonConnectorLimit) Limit {
	return Limit{
		Rate: int(r.Rate), Per: time.Duration(r.PerMs) * time.Millisecond, Burst: int(r.Burst),
		MaxInFlight: int(r.MaxInFlight), PerTenant: r.PerTenant, BreakAfter: int(r.BreakAfter),
		BreakFor: time.Duration(r.BreakForMs) * time.Millisecond,
	}
}

// grant is the answer to a request for a call: wait zero lets it go ahead.
type grant struct {
	limit  Limit
	asked  bool          // the database was asked (and may hold a slot to release)
	wait   time.Duration // how long to wait before asking again; 0: granted
	reason string        // why it waits: rate, in_flight, paused, open or operator (pause.go); "probe" for a granted probe
}

// limited names the effect a call is for, to the limits: its id, tenant and enqueue time (its
// place in the queue of a limit key).
type limited struct {
	effectID uuid.UUID
	tenantID string
	queuedAt time.Time
}

func limitedOf(row dbsqlc.ReckonEffect) limited {
	return limited{effectID: row.ID, tenantID: row.TenantID, queuedAt: row.CreatedAt}
}

// acquireCall asks for one call of effect e to connector under its limits. An unlimited connector
// that is not throttled is granted without asking the database. The turn to ask is waited for
// until until (zero: as long as ctx lasts): an effect that must not wait longer — one of a batch,
// whose job's deadline is shared, or one whose call must still fit in its job's time — is held
// back for busyWait (reason "busy", nothing asked) when its turn does not come by then.
func (c *Client) acquireCall(ctx context.Context, e limited, connector *Connector, until time.Time) (grant, error) {
	limit, ask := c.limits.lookup(ctx, connector)
	if !ask {
		return grant{limit: limit}, nil
	}
	// The database decides one call of a key at a time (its row lock): this process's askers of
	// a key take turns here first, so that they wait without holding the pool's connections.
	release, err := c.limits.askers.take(ctx, connector.Name, limitKeyTenant(limit, e.tenantID), until)
	if err != nil {
		return grant{}, fmt.Errorf("effects: ask the limits of %q: %w", connector.Name, err)
	}
	if release == nil {
		// In the queue all the same, without asking: so it is announced once, and a freed
		// place may be handed to it.
		wait := busyWait()
		if err := c.queries.LimitWaitBusy(ctx, dbsqlc.LimitWaitBusyParams{
			EffectID: e.effectID, Connector: connector.Name, TenantID: limitKeyTenant(limit, e.tenantID), QueuedAt: e.queuedAt,
			ExpectMs: int32((wait + c.limitGrace()).Milliseconds()),
		}); err != nil {
			return grant{}, fmt.Errorf("effects: wait for the limits of %q: %w", connector.Name, err)
		}
		c.metrics.limitWaits.WithLabelValues(connector.Name, "busy").Inc()
		return grant{limit: limit, wait: wait, reason: "busy"}, nil
	}
	defer release()
	res, err := c.queries.LimitAcquire(ctx, dbsqlc.LimitAcquireParams{
		Connector: connector.Name, TenantID: e.tenantID, EffectID: e.effectID, QueuedAt: e.queuedAt,
		Rate: int32(limit.Rate), PerMs: int32(limit.Per.Milliseconds()), Burst: int32(limit.Burst),
		MaxInFlight: int32(limit.MaxInFlight), PerTenant: limit.PerTenant, BreakAfter: int32(limit.BreakAfter),
		BreakForMs: int32(limit.BreakFor.Milliseconds()),
		HoldMs:     c.limitHoldMs(connector),
		GraceMs:    int32(c.limitGrace().Milliseconds()),
	})
	if err != nil {
		return grant{}, fmt.Errorf("effects: ask the limits of %q: %w", connector.Name, err)
	}
	g := grant{limit: limit, asked: true, wait: time.Duration(res.WaitMs) * time.Millisecond, reason: res.Reason}
	if g.wait > 0 {
		c.metrics.limitWaits.WithLabelValues(connector.Name, g.reason).Inc()
	}
	return g, nil
}

// limitGrace is how late a held-back effect may come back before it loses its place in the queue:
// River's poll interval (at least a second) plus limitGraceExtra.
func (c *Client) limitGrace() time.Duration {
	return max(c.config.FetchPollInterval, time.Second) + limitGraceExtra
}

// limitHoldMs is how long a place of connector's cap is held for a call, in milliseconds: its
// timeout plus InFlightMargin, after which a dead reactor's place frees itself.
func (c *Client) limitHoldMs(connector *Connector) int32 {
	return int32((connector.Timeout + c.config.InFlightMargin).Milliseconds())
}

// handOffClaim is how long a place of a cap that a release handed to the effect at the head of the
// queue waits for that effect's reactor to claim it (claimPlace) before it lapses: what a place
// handed to a reactor that died costs.
const handOffClaim = 10 * time.Second

// claimPlace claims the place of a cap a release handed to effect e, if it did: the grant of a
// call. ok false: no place was handed to it (only woken, or lapsed), and it asks as usual.
func (c *Client) claimPlace(ctx context.Context, e limited, connector *Connector, limit Limit) (grant, bool, error) {
	if limit.Rate > 0 {
		return grant{}, false, nil // with a rate, a release only wakes the head to ask
	}
	claimed, err := c.queries.LimitClaim(ctx, dbsqlc.LimitClaimParams{EffectID: e.effectID, HoldMs: c.limitHoldMs(connector)})
	if err != nil {
		return grant{}, false, fmt.Errorf("effects: claim a place of %q: %w", connector.Name, err)
	}
	return grant{limit: limit, asked: true, reason: "granted"}, claimed, nil
}

// awaitCall asks the limits for a call of effect e to connector and, while it is held back by the
// cap, or by the rate for a little while, waits here for its turn: until a call that held a place
// of the cap ends and hands the place to it, at the head of the queue (slotsChannel; it claims the
// place) — a freed place is taken within milliseconds, not at River's next poll — or to the moment
// its turn of the rate comes, when it asks again.
//
// It waits in place only until min(InFlightMargin/4, 10s) after started, when the run of its job
// began: the sweeper presumes a worker dead once its job has run for the call's timeout plus
// InFlightMargin, and the call must still fit. The effect of a job of its own waits only in one of
// the client's places (half of its workers; the effects nearest the head keep them); an effect of
// a batch job (shared) waits in the batch's worker, for a turn of the rate only. Otherwise, or
// when the wait is longer (a turn far off, a pause, an open circuit), it returns the answer that
// holds the effect back, for the job to snooze or hand the effect on.
func (c *Client) awaitCall(ctx context.Context, e limited, connector *Connector, started time.Time, shared bool) (grant, error) {
	var woken chan struct{}
	if limit, ask := c.limits.lookup(ctx, connector); !ask {
		return grant{limit: limit}, nil
	} else if limit.MaxInFlight > 0 && !shared {
		// Subscribed before asking, so that a place freed meanwhile is not missed.
		woken = make(chan struct{}, 1)
		unsubscribe, err := c.notifier.subscribeKey(ctx, notifyKey{channel: slotsChannel, key: e.effectID.String()}, woken)
		if err != nil {
			return grant{}, fmt.Errorf("effects: listen for the places of %q: %w", connector.Name, err)
		}
		defer unsubscribe()
	}
	deadline := started.Add(min(c.config.InFlightMargin/4, maxInlineBudget))
	// An effect of a batch asks only if its turn comes soon: the batch's effects share its job's
	// deadline, and one that waits is handed to a job of its own anyway.
	until := deadline
	if shared {
		until = time.Now().Add(sharedAskWait)
	}
	g, err := c.acquireCall(ctx, e, connector, until)
	if err != nil || g.wait == 0 {
		return g, err
	}
	if !c.waitsInPlace(g, time.Until(deadline), shared) {
		return g, nil
	}
	evicted := make(<-chan struct{}) // never, for an effect of a batch job: it takes no worker of its own
	if !shared {
		p := c.limits.places.take(e)
		if p == nil {
			return g, nil // enough workers wait already, nearer the head
		}
		defer c.limits.places.leave(p)
		evicted = p.evicted
	}
	for c.waitsInPlace(g, time.Until(deadline), shared) {
		// A place of the cap freed for it is notified (woken): the timer is for a place freed
		// without a release (a dead reactor's expiring), later the further back it is.
		wait := min(g.wait, time.Until(deadline))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return g, nil
		case <-evicted:
			timer.Stop()
			return g, nil
		case <-woken:
			timer.Stop()
			// Named by a call that ended: a place handed to it, or (with a rate) a wake to ask.
			claimed, ok, err := c.claimPlace(ctx, e, connector, g.limit)
			if err != nil || ok {
				return claimed, err
			}
		case <-timer.C:
		}
		if g, err = c.acquireCall(ctx, e, connector, deadline); err != nil || g.wait == 0 {
			return g, err
		}
	}
	return g, nil
}

// waitsInPlace reports whether an effect held back as g waits for its limits in its worker, with
// budget left of its time there: held back by the rate for no longer than inPlaceHorizon, or — in
// a job of its own — by the cap (woken when a place is freed for it); not by a pause or an open
// circuit, which last. An effect of a batch job held back by the cap is handed to a job of its
// own at once, so that a batch never keeps many waiters asking in one worker.
func (c *Client) waitsInPlace(g grant, budget time.Duration, shared bool) bool {
	switch g.reason {
	case "in_flight":
		return budget > 0 && !shared
	case "rate":
		return g.wait <= min(budget, c.inPlaceHorizon())
	}
	return false
}

// inPlaceHorizon is the longest wait an effect waits in its worker rather than snoozed: twice
// River's fetch cooldown (a snoozed job comes back within one of the fetch limitSnooze asks for),
// and at least 200 ms.
func (c *Client) inPlaceHorizon() time.Duration {
	cooldown := c.config.FetchCooldown
	if cooldown <= 0 {
		cooldown = 100 * time.Millisecond // River's default
	}
	return max(2*cooldown, 200*time.Millisecond)
}

// limitSnooze is how long a job whose effect is held back for wait snoozes: until shortly before
// its turn, when it asks River to fetch (fetchAt) so that it is back within River's fetch cooldown
// instead of at River's next poll (a second by default), and never past River's scheduler interval,
// so that it stays available and is fetched once due rather than waiting for the leader's
// scheduler. The rest of the wait it waits in place.
func (c *Client) limitSnooze(wait time.Duration) time.Duration {
	d := min(max(wait-c.inPlaceHorizon()/2, time.Millisecond), riverSchedulerInterval)
	c.limits.fetchAt(time.Now().Add(d), c.config.Queue)
	return d
}

// fetchAt makes the River producers of queue fetch at t: a job snoozed until t is then fetched
// within River's fetch cooldown, not at the next poll. It sends River's own insert notification
// for the queue (as River's inserts do) from a timer; the times of a process are coalesced to
// 20 ms. A notification lost (the process stopped) costs a wait until the next poll.
func (l *limiter) fetchAt(t time.Time, queue string) {
	const grain = 20 * time.Millisecond
	at := t.Truncate(grain).Add(grain)
	l.fetchMu.Lock()
	defer l.fetchMu.Unlock()
	if l.fetches == nil {
		l.fetches = map[time.Time]bool{}
	}
	if l.fetches[at] {
		return
	}
	l.fetches[at] = true
	time.AfterFunc(time.Until(at), func() {
		l.fetchMu.Lock()
		delete(l.fetches, at)
		l.fetchMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), limitLoadTimeout)
		defer cancel()
		if err := dbsqlc.New(l.pool).LimitFetchNotify(ctx, queue); err != nil {
			l.logger.Debug("limits: ask River to fetch", slog.String("error", err.Error()))
		}
	})
}

// heldBackUncalled reports whether the effect is waiting for its limits: then no call of it was
// made since it last asked, for a grant deletes its waiter row in the statement that grants it.
// An interrupted run of its job that it waited in made no call.
func (c *Client) heldBackUncalled(ctx context.Context, effectID uuid.UUID) (bool, error) {
	return c.queries.LimitWaiting(ctx, effectID)
}

// releaseCall tells the database how a granted call went, when that matters: it frees the call's
// slot (a cap, a probe), counts the circuit's failures, and pauses the connector for everyone on
// an upstream's Retry-After. out nil says no call was made after all: the grant is given back
// without touching the circuit's count. A failure is logged: a slot left behind frees itself when
// it expires.
func (c *Client) releaseCall(ctx context.Context, e limited, connector *Connector, g grant, out *outcome) {
	var (
		retryAfter time.Duration
		failed     *bool
	)
	if out != nil {
		if out.kind == outcomeRetry && out.retryAfter > 0 {
			retryAfter = min(out.retryAfter, maxRetryAfterPause)
		}
		f := out.kind == outcomeRetry || out.kind == outcomeUnknown
		failed = &f // not ptr: false is an answer here, not absent
	}
	holds := g.asked && (g.limit.MaxInFlight > 0 || g.limit.BreakAfter > 0 || g.reason == "probe")
	if !holds && retryAfter == 0 {
		return
	}
	params := limitReleaseParams(connector.Name, e.tenantID, e.effectID, g.limit)
	params.Failed, params.RetryAfterMs = failed, int32(retryAfter.Milliseconds())
	err := c.queries.LimitRelease(ctx, params)
	if err != nil {
		c.logger.WarnContext(ctx, "limits: release a call", slog.String("connector", connector.Name),
			slog.String("effect_id", e.effectID.String()), slog.String("error", err.Error()))
	}
	if retryAfter > 0 {
		c.limits.invalidate() // our own next call sees the pause at once
	}
}

// freePlacesOf frees the places of a cap held by the calls of jobs taken over from a dead reactor
// and hands them to the effects at the head of their queues, in the takeover's transaction tx —
// before the jobs run again, so that a place one of their effects takes anew is never freed: the
// dead reactor's calls will never be released, and their slots would hold the places until the
// call's timeout plus InFlightMargin. Each is given back as a grant whose call is not known (not
// counted for or against the circuit; a probe's turn is freed). It runs in a savepoint: a failure
// is logged and leaves the slots to lapse as they would, and the takeover goes on.
func (c *Client) freePlacesOf(ctx context.Context, tx pgx.Tx, jobs []int64) {
	if len(jobs) == 0 {
		return
	}
	sp, err := tx.Begin(ctx)
	if err == nil {
		err = c.releasePlacesOf(ctx, dbsqlc.New(sp), jobs)
		if err == nil {
			err = sp.Commit(ctx)
		}
		if err != nil {
			_ = sp.Rollback(ctx)
		}
	}
	if err != nil {
		c.logger.WarnContext(ctx, "limits: free the places of a dead reactor's calls", slog.String("error", err.Error()))
	}
}

func (c *Client) releasePlacesOf(ctx context.Context, q *dbsqlc.Queries, jobs []int64) error {
	slots, err := q.LimitSlotsOfJobs(ctx, jobs)
	if err != nil {
		return err
	}
	for _, s := range slots {
		limit := Limit{} // an unknown connector: only an operator's limit is known, in the database
		if connector, ok := c.registry.Get(s.Connector); ok {
			limit, _ = c.limits.lookup(ctx, connector)
		}
		if err := q.LimitRelease(ctx, limitReleaseParams(s.Connector, s.TenantID, s.EffectID, limit)); err != nil {
			return fmt.Errorf("%s of %s: %w", s.EffectID, s.Connector, err)
		}
	}
	return nil
}

// limitReleaseParams are the arguments of reckon_limit_release for the call of effectID (of
// tenantID) to connector under limit: a grant given back (Failed nil, no Retry-After) unless the
// caller says how the call went.
func limitReleaseParams(connector, tenantID string, effectID uuid.UUID, limit Limit) dbsqlc.LimitReleaseParams {
	return dbsqlc.LimitReleaseParams{
		Connector: connector, TenantID: tenantID, EffectID: effectID, PerTenant: limit.PerTenant,
		BreakAfter: int32(limit.BreakAfter), BreakForMs: int32(limit.BreakFor.Milliseconds()),
		MaxInFlight: int32(limit.MaxInFlight), Rate: int32(limit.Rate), ClaimMs: int32(handOffClaim.Milliseconds()),
	}
}

// runLimitListener makes the view follow the notifications of limitsChannel until ctx ends.
func (c *Client) runLimitListener(ctx context.Context, sub *Subscription) {
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.C:
			c.limits.invalidate()
		}
	}
}

// LimitSetting is an operator's limit of a connector as stored.
type LimitSetting struct {
	Connector string
	Limit     Limit
	SetBy     string
	Reason    string
	SetAt     time.Time
}

// LimitState is the state of one limit key: a connector, or a connector and tenant when its
// limit is per tenant (TenantID "" otherwise).
type LimitState struct {
	Connector string
	TenantID  string
	// NextAt is when the rate's next new call is due, once every call granted or reserved so far
	// has had its turn (a Burst of them may go early); nil when that time has passed.
	NextAt *time.Time
	// PausedUntil is set while an upstream's Retry-After pauses the key.
	PausedUntil *time.Time
	// Failures counts consecutive failed calls (for a circuit breaker).
	Failures int
	// Circuit is "closed", "open" (until OpenUntil) or "half_open" (its probe call may go).
	Circuit   string
	OpenUntil *time.Time
	// InFlight is how many granted calls have not ended; Waiting how many effects wait.
	InFlight int
	Waiting  int
}

// ErrInvalidLimit is returned (wrapped) for a limit or connector name out of range.
var ErrInvalidLimit = errors.New("effects: invalid limit")

// maxConnectorNameLen bounds the connector name an operator's limit names.
const maxConnectorNameLen = 200

// checkLimitSetting refuses a connector name, actor or reason Postgres cannot store, or a name
// out of bounds, naming the field.
func checkLimitSetting(connector, actor, reason string) error {
	if connector == "" || len(connector) > maxConnectorNameLen {
		return fmt.Errorf("%w: connector: must be 1 to %d bytes", ErrInvalidLimit, maxConnectorNameLen)
	}
	if err := jsonx.CheckTexts("connector", connector, "actor", actor, "reason", reason); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	return nil
}

// SetLimit sets an operator's limit for connector, replacing the connector's own (Connector.Limit,
// or an HTTP connector's definition) in every reactor within moments, without a restart; by actor,
// for reason. The zero Limit lifts every limit of the connector. Errors: ErrInvalidLimit.
func (c *Client) SetLimit(ctx context.Context, connector string, limit Limit, actor, reason string) (*LimitSetting, error) {
	if err := checkLimitSetting(connector, actor, reason); err != nil {
		return nil, err
	}
	limit, err := limit.WithDefaults()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	row, err := inTx(ctx, c, func(tx pgx.Tx) (dbsqlc.ReckonConnectorLimit, error) {
		q := dbsqlc.New(tx)
		row, err := q.LimitSet(ctx, dbsqlc.LimitSetParams{
			Connector: connector, Rate: int32(limit.Rate), PerMs: int32(limit.Per.Milliseconds()), Burst: int32(limit.Burst),
			MaxInFlight: int32(limit.MaxInFlight), PerTenant: limit.PerTenant, BreakAfter: int32(limit.BreakAfter),
			BreakForMs: int32(limit.BreakFor.Milliseconds()), SetBy: actor, Reason: reason,
		})
		if err != nil {
			return row, err
		}
		return row, q.LimitNotify(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("effects: set the limit of %q: %w", connector, err)
	}
	c.limits.invalidate()
	return &LimitSetting{
		Connector: row.Connector, Limit: limitOfRow(row),
		SetBy: row.SetBy, Reason: row.Reason, SetAt: row.SetAt,
	}, nil
}

// ClearLimit deletes the operator's limit of connector: the connector's own applies again. It
// reports whether there was one.
func (c *Client) ClearLimit(ctx context.Context, connector string) (bool, error) {
	return c.writeLimit(ctx, connector, "clear the limit of", (*dbsqlc.Queries).LimitClear)
}

// ResetLimit closes connector's circuits and ends its pauses (for every tenant): an operator's
// word that the upstream is back. It reports whether anything was paused, open or counting
// failures. An operator's pause (PauseConnector) is not ended by it: ResumeConnector ends that.
func (c *Client) ResetLimit(ctx context.Context, connector string) (bool, error) {
	return c.writeLimit(ctx, connector, "reset the limit state of", (*dbsqlc.Queries).LimitReset)
}

// writeLimit runs write, a statement on connector's limits (what it does, for its error), and
// when it changed a row tells the reactors in the same transaction; then it drops the cached
// limits. It reports whether write changed a row.
func (c *Client) writeLimit(ctx context.Context, connector, what string, write func(*dbsqlc.Queries, context.Context, string) (int64, error)) (bool, error) {
	if err := checkLimitSetting(connector, "", ""); err != nil {
		return false, err
	}
	changed, err := inTx(ctx, c, func(tx pgx.Tx) (bool, error) {
		q := dbsqlc.New(tx)
		n, err := write(q, ctx, connector)
		if err != nil || n == 0 {
			return false, err
		}
		return true, q.LimitNotify(ctx)
	})
	if err != nil {
		return false, fmt.Errorf("effects: %s %q: %w", what, connector, err)
	}
	c.limits.invalidate()
	return changed, nil
}

// LimitSettings returns every operator's limit, by connector.
func (c *Client) LimitSettings(ctx context.Context) ([]LimitSetting, error) {
	rows, err := c.queries.LimitOverrides(ctx)
	if err != nil {
		return nil, fmt.Errorf("effects: read the operators' limits: %w", err)
	}
	out := make([]LimitSetting, len(rows))
	for i, r := range rows {
		out[i] = LimitSetting{Connector: r.Connector, Limit: limitOfRow(r), SetBy: r.SetBy, Reason: r.Reason, SetAt: r.SetAt}
	}
	return out, nil
}

// LimitStates returns the state of every limit key that was ever used, by connector and tenant.
func (c *Client) LimitStates(ctx context.Context) ([]LimitState, error) {
	rows, err := c.queries.LimitStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("effects: read the limits' state: %w", err)
	}
	now := time.Now()
	out := make([]LimitState, len(rows))
	for i, r := range rows {
		s := LimitState{
			Connector: r.Connector, TenantID: r.TenantID,
			Failures: int(r.Failures), Circuit: "closed", OpenUntil: r.OpenedUntil,
			InFlight: int(r.InFlight), Waiting: int(r.Waiting),
		}
		if r.NextAt.After(now) {
			s.NextAt = &r.NextAt
		}
		if r.PausedUntil != nil && r.PausedUntil.After(now) {
			s.PausedUntil = r.PausedUntil
		}
		if r.OpenedUntil != nil {
			s.Circuit = "half_open"
			if r.OpenedUntil.After(now) {
				s.Circuit = "open"
			}
		}
		out[i] = s
	}
	return out, nil
}

// limitJSON is the JSON form of a Limit, durations in milliseconds.
type limitJSON struct {
	Rate        int   `json:"rate,omitempty"`
	PerMS       int64 `json:"per_ms,omitempty"`
	Burst       int   `json:"burst,omitempty"`
	MaxInFlight int   `json:"max_in_flight,omitempty"`
	PerTenant   bool  `json:"per_tenant,omitempty"`
	BreakAfter  int   `json:"break_after,omitempty"`
	BreakForMS  int64 `json:"break_for_ms,omitempty"`
}

// MarshalJSON writes l as {"rate","per_ms","burst","max_in_flight","per_tenant","break_after",
// "break_for_ms"}, zero fields left out.
func (l Limit) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitJSON{
		Rate: l.Rate, PerMS: l.Per.Milliseconds(), Burst: l.Burst, MaxInFlight: l.MaxInFlight,
		PerTenant: l.PerTenant, BreakAfter: l.BreakAfter, BreakForMS: l.BreakFor.Milliseconds(),
	})
}

// UnmarshalJSON reads the form MarshalJSON writes, refusing unknown fields and values out of range
// (ErrInvalidLimit, naming the field); the defaults are not filled in (WithDefaults).
func (l *Limit) UnmarshalJSON(data []byte) error {
	var in limitJSON
	if err := jsonx.DecodeStrict(data, &in); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	for _, f := range []struct {
		name  string
		value int64
		max   int64
	}{
		{"rate", int64(in.Rate), maxLimitCount}, {"burst", int64(in.Burst), maxLimitCount},
		{"max_in_flight", int64(in.MaxInFlight), maxLimitCount}, {"break_after", int64(in.BreakAfter), maxLimitCount},
		{"per_ms", in.PerMS, maxLimitPer.Milliseconds()}, {"break_for_ms", in.BreakForMS, maxLimitPer.Milliseconds()},
	} {
		if f.value < 0 || f.value > f.max {
			return fmt.Errorf("%w: %s %d out of range (0 to %d)", ErrInvalidLimit, f.name, f.value, f.max)
		}
	}
	*l = Limit{
		Rate: in.Rate, Per: time.Duration(in.PerMS) * time.Millisecond, Burst: in.Burst, MaxInFlight: in.MaxInFlight,
		PerTenant: in.PerTenant, BreakAfter: in.BreakAfter, BreakFor: time.Duration(in.BreakForMS) * time.Millisecond,
	}
	return nil
}
