package cli

import (
	"fmt"
	"time"

	"github.com/reckonhq/reckon/retention"
)

// RetentionFlags are the retention settings the reactor and `server retention status|run` share
// (docs/operations.md, "Retention"), each a flag defaulting to an environment variable.
type RetentionFlags struct {
	EffectRetention time.Duration
	AuditRetention  time.Duration
	EventRetention  time.Duration
	DedupWindow     time.Duration
	IdempotencyTTL  time.Duration
	BatchSize       int
	// Interval is the reactor's only (RegisterInterval).
	Interval time.Duration
}

// Register defines -effect-retention, -audit-retention, -event-retention, -dedup-window, -idempotency-ttl and
// -retention-batch on env's flag set.
func (f *RetentionFlags) Register(env *EnvFlags) {
	env.DurationVar(&f.EffectRetention, "effect-retention", "RECKON_EFFECT_RETENTION", retention.DefaultEffectRetention,
		"how long settled effects, finished sagas, runs and turn groups are kept (a tenant's policy overrides it: `server retention policy`); at least 1h")
	env.DurationVar(&f.AuditRetention, "audit-retention", "RECKON_AUDIT_RETENTION", retention.DefaultAuditRetention,
		"how long the audit histories are kept (whole partitions, never while an effect or saga they tell of exists); 0 keeps them forever, else at least -effect-retention")
	env.DurationVar(&f.EventRetention, "event-retention", "RECKON_EVENT_RETENTION", retention.DefaultEventRetention,
		"how long the event log is kept (whole partitions, never while an active webhook subscription has not delivered one of their events); 0 keeps it forever, else at least 1h")
	env.DurationVar(&f.DedupWindow, "dedup-window", "RECKON_DEDUP_WINDOW", 0,
		"how long the idempotency key of a pruned effect is still recognised (a tombstone from the effect's settling on); 0: none, a late enqueue of a pruned key makes a new effect")
	env.DurationVar(&f.IdempotencyTTL, "idempotency-ttl", "RECKON_IDEMPOTENCY_TTL", retention.DefaultIdempotencyTTL,
		"how long a response stored for an Idempotency-Key is kept")
	env.IntVar(&f.BatchSize, "retention-batch", "RECKON_RETENTION_BATCH", retention.DefaultBatchSize,
		"rows (runs, turn groups, effects with their compensations) per delete transaction; 1 to 10000")
}

// RegisterInterval defines -retention-interval (the reactor's).
func (f *RetentionFlags) RegisterInterval(env *EnvFlags) {
	env.DurationVar(&f.Interval, "retention-interval", "RECKON_RETENTION_INTERVAL", retention.DefaultInterval,
		"how often the leader among the reactors runs retention (and once when it starts); 0: this reactor never runs it")
}

// Validate names the flag whose value is out of range.
func (f *RetentionFlags) Validate() error {
	switch {
	case f.EffectRetention < retention.MinEffectRetention:
		return fmt.Errorf("-effect-retention must be at least %v, got %v", retention.MinEffectRetention, f.EffectRetention)
	case f.AuditRetention < 0 || (f.AuditRetention > 0 && f.AuditRetention < f.EffectRetention):
		return fmt.Errorf("-audit-retention must be 0 (keep forever) or at least -effect-retention %v, got %v", f.EffectRetention, f.AuditRetention)
	case f.EventRetention < 0 || (f.EventRetention > 0 && f.EventRetention < time.Hour):
		return fmt.Errorf("-event-retention must be 0 (keep forever) or at least 1h, got %v", f.EventRetention)
	case f.DedupWindow < 0 || (f.DedupWindow > 0 && f.DedupWindow < time.Second):
		return fmt.Errorf("-dedup-window must be 0 (no tombstones) or at least 1s, got %v", f.DedupWindow)
	case f.IdempotencyTTL < time.Second:
		return fmt.Errorf("-idempotency-ttl must be at least 1s, got %v", f.IdempotencyTTL)
	case f.BatchSize < 1 || f.BatchSize > 10_000:
		return fmt.Errorf("-retention-batch must be between 1 and 10000, got %d", f.BatchSize)
	case f.Interval < 0 || (f.Interval > 0 && f.Interval < time.Second):
		return fmt.Errorf("-retention-interval must be 0 (no retention on this reactor) or at least 1s, got %v", f.Interval)
	}
	return nil
}

// Config is the retention.Config of the flags (Logger, Registerer and Now left to the caller).
func (f *RetentionFlags) Config() *retention.Config {
	return &retention.Config{
		EffectRetention: f.EffectRetention, AuditRetention: f.AuditRetention, EventRetention: f.EventRetention, DedupWindow: f.DedupWindow,
		IdempotencyTTL: f.IdempotencyTTL, BatchSize: f.BatchSize, Interval: f.Interval,
	}
}
