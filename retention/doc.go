// Package retention bounds Reckon's storage: it deletes settled work once it is older than the
// effect retention, and drops whole partitions of the audit histories once they are older than the
// audit retention and tell of nothing that still exists (docs/operations.md, "Retention").
//
// # Basics
//
// A reactor installs a Retention as a plugin of its effects.Client (Install): the elected leader
// runs it every Config.Interval, and at start. An operator runs it by hand with
// `server retention run`, and sees what it would do with `server retention status`:
//
//	r, err := retention.New(pool, &retention.Config{EffectRetention: 30 * 24 * time.Hour})
//	client, err := effects.NewClient(pool, &effects.Config{Registry: registry, Plugins: []effects.Plugin{r}})
//
// A run (Run) takes the retention lock, so that one run at a time prunes a database whatever the
// number of reactors, makes the partitions of the histories ahead of time, and then deletes, each
// in batches of Config.BatchSize rows, each batch a short transaction of its own that skips the
// rows another transaction holds:
//
//  1. finished sagas (COMPLETED, COMPENSATED) with their steps; their history stays;
//  2. whole turn groups whose every turn is finished (COMPLETE, SUPERSEDED, FAILED), with their
//     messages and supersede decisions;
//  3. whole runs (reckon_runs) whose every effect is settled, with those effects;
//  4. settled effects (CONFIRMED, FAILED) with their compensations;
//  5. expired effect tombstones, 6. stored Idempotency-Key responses older than
//     Config.IdempotencyTTL, 7. expired signatures of signed callbacks, 8. expired console
//     sessions;
//
// then drops the partitions of the histories past Config.AuditRetention, and forgets its own
// records (reckon_retention_runs) past the audit retention.
//
// # Never pruned
//
// An effect that is PENDING, UNKNOWN or STUCK; an effect that a saga (finished or not) still has as
// a step or a compensation, that belongs to a turn group still holding a turn, or to a run still
// holding an unsettled or recent effect; an effect whose compensation is unsettled or recent. A
// run, a turn group, an effect and its compensations go whole, in one transaction, or not at all.
//
// # Caveats
//
// Pruning an effect frees its idempotency key: a late enqueue with the same key creates a new
// effect and performs the call again, unless Config.DedupWindow leaves a tombstone of the key.
// Pruning a saga frees its start key, pruning a turn group frees its messages' ids (a message
// resubmitted after that is new), and a session whose every turn was pruned numbers its turns
// from 1 again. A run id used again after its run was pruned starts a new run.
package retention
