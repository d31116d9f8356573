package cli

import (
	"fmt"
	"time"

	"github.com/reckonhq/reckon/retention"
)

// RetentionFlags are the retention settings the reactor and `server retention status|run` share
// (docs/operations.md, "Retention"), each a flag defaulting to an environment variable.
type RetentionFlags struct {
	// Config holds the flags' values. Its Logger, Registerer and Now are left to the caller; its
	// Interval is the reactor's only (RegisterInterval), where 0 means that this reactor never runs
	// retention.
	Config retention.Config
}

// Register defines -effect-retention, -audit-retention, -event-retention, -dedup-window, -idempotency-ttl and
// -retention-batch on env's flag set.
func (f *RetentionFlags) Register(env *EnvFlags) {
	env.DurationVar(&f.Config.EffectRetention, "effect-retention", "RECKON_EFFECT_RETENTION", retention.DefaultEffectRetention,
		"how long settled effects, finished sagas, runs and turn groups are kept (a tenant's policy overrides it: `server retention policy`); at least 1h")
	env.DurationVar(&f.Config.AuditRetention, "audit-retention", "RECKON_AUDIT_RETENTION", retention.DefaultAuditRetention,
		"how long the audit histories are kept (whole partitions, never while an effect or saga they tell of exists); 0 keeps them forever, else at least -effect-retention")
	env.DurationVar(&f.Config.EventRetention, "event-retention", "RECKON_EVENT_RETENTION", retention.DefaultEventRetention,
		"how long the event log is kept (whole partitions, never while an active webhook subscription has not delivered one of their events); 0 keeps it forever, else at least 1h")
	env.DurationVar(&f.Config.DedupWindow, "dedup-window", "RECKON_DEDUP_WINDOW", 0,
		"how long the idempotency key of a pruned effect is still recognised (a tombstone from the effect's settling on); 0: none, a late enqueue of a pruned key makes a new effect")
	env.DurationVar(&f.Config.IdempotencyTTL, "idempotency-ttl", "RECKON_IDEMPOTENCY_TTL", retention.DefaultIdempotencyTTL,
		"how long a response stored for an Idempotency-Key is kept")
	env.IntVar(&f.Config.BatchSize, "retention-batch", "RECKON_RETENTION_BATCH", retention.DefaultBatchSize,
		"rows (runs, turn groups, effects with their compensations) per delete transaction; 1 to 10000")
}

// RegisterInterval defines -retention-interval (the reactor's).
func (f *RetentionFlags) RegisterInterval(env *EnvFlags) {
	env.DurationVar(&f.Config.Interval, "retention-interval", "RECKON_RETENTION_INTERVAL", retention.DefaultInterval,
		"how often the leader among the reactors runs retention (and once when it starts); 0: this reactor never runs it")
}

// Validate names the flag whose value is out of range (retention.Config.ValidateAs's rules).
func (f *RetentionFlags) Validate() error {
	if f.Config.Interval < 0 || (f.Config.Interval > 0 && f.Config.Interval < time.Second) {
		return fmt.Errorf("-retention-interval must be 0 (no retention on this reactor) or at least 1s, got %v", f.Config.Interval)
	}
	c := f.Config
	c.Interval = max(c.Interval, time.Second) // 0 is this reactor's "never", checked above
	return c.ValidateAs(func(field string) string { return retentionFlagNames[field] })
}

// retentionFlagNames are the flags of retention.Config's fields.
var retentionFlagNames = map[string]string{
	"EffectRetention": "-effect-retention", "AuditRetention": "-audit-retention", "EventRetention": "-event-retention",
	"DedupWindow": "-dedup-window", "IdempotencyTTL": "-idempotency-ttl", "BatchSize": "-retention-batch", "Interval": "-retention-interval",
}
