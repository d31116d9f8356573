package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
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
	// gen counts the invalidations. A view read when it was g is current while it still is: an
	// invalidation during a read (a pause written after the read's query) makes the view that
	// read stores stale at once.
	gen atomic.Uint64
}

// limitView is one reading of the limits; never changed once stored.
type limitView struct {
	loadedAt  time.Time
	gen       uint64 // limiter.gen when the read began
	overrides map[string]Limit
	throttled map[string]throttle // by connector
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

func newLimiter(pool *pgxpool.Pool, logger *slog.Logger) *limiter {
	return &limiter{pool: pool, logger: logger}
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
// the database: it has a limit, or one of its keys is paused or its circuit not closed, or the
// view is out of date (a notification came while it is read again: it may be a pause).
func (l *limiter) lookup(ctx context.Context, connector *Connector) (Limit, bool) {
	v, stale := l.current(ctx)
	limit, ok := v.overrides[connector.Name]
	if !ok {
		limit = connector.Limit
	}
	t := v.throttled[connector.Name]
	return limit, stale || !limit.unlimited() || t.open || time.Now().Before(t.pausedUntil)
}

// load reads the view. On failure it keeps the previous one's contents, and the view it returns
// is read again after limitLoadRetry.
func (l *limiter) load(ctx context.Context, previous *limitView) *limitView {
	next := &limitView{loadedAt: time.Now(), gen: l.gen.Load()} // before the queries
	failed := func(what string, err error) *limitView {
		l.logger.WarnContext(ctx, "limits: read "+what, slog.String("error", err.Error()))
		next.loadedAt = next.loadedAt.Add(limitLoadRetry - limitViewTTL)
		if previous != nil {
			next.overrides, next.throttled = previous.overrides, previous.throttled
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

// snapshot returns the view's throttled connectors, for the metrics (not to be changed).
func (l *limiter) snapshot(ctx context.Context) map[string]throttle {
	v, _ := l.current(ctx)
	return v.throttled
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
	reason string        // why it waits: rate, in_flight, paused or open; "probe" for a granted probe
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
// that is not throttled is granted without asking the database.
func (c *Client) acquireCall(ctx context.Context, e limited, connector *Connector) (grant, error) {
	limit, ask := c.limits.lookup(ctx, connector)
	if !ask {
		return grant{limit: limit}, nil
	}
	res, err := c.queries.LimitAcquire(ctx, dbsqlc.LimitAcquireParams{
		Connector: connector.Name, TenantID: e.tenantID, EffectID: e.effectID, QueuedAt: e.queuedAt,
		Rate: int32(limit.Rate), PerMs: int32(limit.Per.Milliseconds()), Burst: int32(limit.Burst),
		MaxInFlight: int32(limit.MaxInFlight), PerTenant: limit.PerTenant, BreakAfter: int32(limit.BreakAfter),
		BreakForMs: int32(limit.BreakFor.Milliseconds()),
		HoldMs:     int32((connector.Timeout + c.config.InFlightMargin).Milliseconds()),
		GraceMs:    int32((max(c.config.FetchPollInterval, time.Second) + limitGraceExtra).Milliseconds()),
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
	err := c.queries.LimitRelease(ctx, dbsqlc.LimitReleaseParams{
		Connector: connector.Name, TenantID: e.tenantID, EffectID: e.effectID, PerTenant: g.limit.PerTenant,
		BreakAfter: int32(g.limit.BreakAfter), BreakForMs: int32(g.limit.BreakFor.Milliseconds()),
		Failed: failed, RetryAfterMs: int32(retryAfter.Milliseconds()),
	})
	if err != nil {
		c.logger.WarnContext(ctx, "limits: release a call", slog.String("connector", connector.Name),
			slog.String("effect_id", e.effectID.String()), slog.String("error", err.Error()))
	}
	if retryAfter > 0 {
		c.limits.invalidate() // our own next call sees the pause at once
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
	row, err := c.queries.LimitSet(ctx, dbsqlc.LimitSetParams{
		Connector: connector, Rate: int32(limit.Rate), PerMs: int32(limit.Per.Milliseconds()), Burst: int32(limit.Burst),
		MaxInFlight: int32(limit.MaxInFlight), PerTenant: limit.PerTenant, BreakAfter: int32(limit.BreakAfter),
		BreakForMs: int32(limit.BreakFor.Milliseconds()), SetBy: actor, Reason: reason,
	})
	if err != nil {
		return nil, fmt.Errorf("effects: set the limit of %q: %w", connector, err)
	}
	c.limits.invalidate()
	return &LimitSetting{
		Connector: row.Connector, Limit: limitOfRow(dbsqlc.ReckonConnectorLimit(row)),
		SetBy: row.SetBy, Reason: row.Reason, SetAt: row.SetAt,
	}, nil
}

// ClearLimit deletes the operator's limit of connector: the connector's own applies again. It
// reports whether there was one.
func (c *Client) ClearLimit(ctx context.Context, connector string) (bool, error) {
	if err := checkLimitSetting(connector, "", ""); err != nil {
		return false, err
	}
	n, err := c.queries.LimitClear(ctx, connector)
	if err != nil {
		return false, fmt.Errorf("effects: clear the limit of %q: %w", connector, err)
	}
	c.limits.invalidate()
	return n > 0, nil
}

// ResetLimit closes connector's circuits and ends its pauses (for every tenant): an operator's
// word that the upstream is back. It reports whether anything was paused, open or counting
// failures.
func (c *Client) ResetLimit(ctx context.Context, connector string) (bool, error) {
	if err := checkLimitSetting(connector, "", ""); err != nil {
		return false, err
	}
	n, err := c.queries.LimitReset(ctx, connector)
	if err != nil {
		return false, fmt.Errorf("effects: reset the limit state of %q: %w", connector, err)
	}
	c.limits.invalidate()
	return n > 0, nil
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
