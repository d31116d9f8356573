package retention

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config and of the reactor's flags.
const (
	DefaultEffectRetention = 30 * 24 * time.Hour
	DefaultAuditRetention  = 400 * 24 * time.Hour
	DefaultEventRetention  = 30 * 24 * time.Hour
	DefaultIdempotencyTTL  = 24 * time.Hour
	DefaultBatchSize       = 500
	DefaultInterval        = time.Hour
)

// MinEffectRetention is the shortest effect retention, global or per tenant.
const MinEffectRetention = time.Hour

// Config configures a Retention. Every field has a default.
type Config struct {
	// EffectRetention is how long settled effects, finished sagas, runs and turn groups are kept
	// after they settled (after their last change), unless the tenant has a policy of its own
	// (reckon_retention_policies). Default DefaultEffectRetention (30 days); at least 1h.
	EffectRetention time.Duration
	// AuditRetention is how long the audit histories are kept: a partition whose range ends more
	// than AuditRetention ago is dropped, once no effect or saga it tells of exists. 0 (the
	// default) keeps them forever; the reactor's -audit-retention defaults to
	// DefaultAuditRetention (400 days). Otherwise at least EffectRetention, so that the history of
	// an effect outlives it.
	AuditRetention time.Duration
	// EventRetention is how long the event log (reckon_events, package events) is kept: a
	// partition whose range ends more than EventRetention ago is dropped, unless an active webhook
	// subscription has not delivered one of its events yet (its position is before the partition's
	// last event): nothing a subscriber still needs is dropped. A reader whose position is in a
	// dropped partition gets events.ErrExpired. 0 (the default) keeps the log forever; the
	// reactor's -event-retention defaults to DefaultEventRetention (30 days). Otherwise at least
	// 1h.
	EventRetention time.Duration
	// DedupWindow is how long the idempotency key of a pruned effect is still recognised: a
	// tombstone (reckon_effect_tombstones) is kept until the effect's settle time plus DedupWindow,
	// and an enqueue of that key within it is answered as a duplicate. 0 (the default): no
	// tombstones; a late enqueue of a pruned effect's key creates a new effect.
	DedupWindow time.Duration
	// IdempotencyTTL is how long the API's stored Idempotency-Key responses are kept. Default
	// DefaultIdempotencyTTL (24h).
	IdempotencyTTL time.Duration
	// BatchSize is how many rows (turn groups, runs, effects with their compensations) one delete
	// transaction takes. Default DefaultBatchSize (500); 1 to 10000.
	BatchSize int
	// Interval is how often the periodic job of a reactor that installed the Retention runs it.
	// Default DefaultInterval (1h).
	Interval time.Duration
	// Now is the clock of the cutoffs and of the partitions' horizon. Default time.Now; tests move
	// it.
	Now func() time.Time
	// Logger receives a line per run, progress lines on long runs and the lock timeouts. Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (the reckon_retention_* series, docs/operations.md).
	// Default: none (not exported).
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() {
	c.EffectRetention = cmp.Or(c.EffectRetention, DefaultEffectRetention)
	c.IdempotencyTTL = cmp.Or(c.IdempotencyTTL, DefaultIdempotencyTTL)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports what is wrong with the configuration, naming the field.
func (c *Config) Validate() error {
	if err := c.ValidateAs(func(field string) string { return "Config." + field }); err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	if c.Now == nil || c.Logger == nil {
		return errors.New("retention: Config.Now and Config.Logger must not be nil")
	}
	return nil
}

// ValidateAs checks the durations and sizes as Validate does, naming each field (EffectRetention,
// AuditRetention, …) as name returns it: the reactor's flags are named -effect-retention and so on.
func (c *Config) ValidateAs(name func(field string) string) error {
	switch {
	case c.EffectRetention < MinEffectRetention:
		return fmt.Errorf("%s must be at least %v, got %v", name("EffectRetention"), MinEffectRetention, c.EffectRetention)
	case c.AuditRetention < 0 || (c.AuditRetention > 0 && c.AuditRetention < c.EffectRetention):
		return fmt.Errorf("%s must be 0 (keep forever) or at least %s %v (an effect's history outlives it), got %v",
			name("AuditRetention"), name("EffectRetention"), c.EffectRetention, c.AuditRetention)
	case c.EventRetention < 0 || (c.EventRetention > 0 && c.EventRetention < time.Hour):
		return fmt.Errorf("%s must be 0 (keep forever) or at least 1h, got %v", name("EventRetention"), c.EventRetention)
	case c.DedupWindow < 0 || (c.DedupWindow > 0 && c.DedupWindow < time.Second):
		return fmt.Errorf("%s must be 0 (no tombstones) or at least 1s, got %v", name("DedupWindow"), c.DedupWindow)
	case c.IdempotencyTTL < time.Second:
		return fmt.Errorf("%s must be at least 1s, got %v", name("IdempotencyTTL"), c.IdempotencyTTL)
	case c.BatchSize < 1 || c.BatchSize > 10_000:
		return fmt.Errorf("%s must be between 1 and 10000, got %d", name("BatchSize"), c.BatchSize)
	case c.Interval < time.Second:
		return fmt.Errorf("%s must be at least 1s, got %v", name("Interval"), c.Interval)
	}
	return nil
}
