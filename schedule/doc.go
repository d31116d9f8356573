// Package schedule runs periodic effects defined in the database: a schedule is a tenant's
// connector and args with a cron expression or an interval, and every tick of it enqueues one
// effect, exactly once across any number of reactors.
//
// # Basics
//
// A Schedule is stored with Put (the HTTP API's PUT /v1/schedules/{tenant}/{name} and `server
// schedules set` call it) and read with Get and List. A Scheduler is a plugin of an
// effects.Client (effects.Config.Plugins): while the client is started, it looks every
// Config.Interval for the schedules whose next tick is due and, for each, in one transaction,
// locks its row (FOR UPDATE SKIP LOCKED: another scheduler skips it), enqueues the effect of each
// due tick with effects.Client.EnqueueTx under the idempotency key schedule/<name>/<tick RFC 3339,
// UTC> and moves next_tick past them. A reactor killed at any point of a round leaves nothing of
// it (the transaction rolls back, the row is unlocked) or all of it; and two rounds that both
// reached the same tick would meet on the idempotency key, so the tick still has one effect.
//
// # Ticks
//
// A cron schedule's ticks are those of a standard 5-field expression (minute hour day-of-month
// month day-of-week) or a descriptor (@yearly, @monthly, @weekly, @daily, @midnight, @hourly), in
// UTC unless the expression starts with CRON_TZ=<IANA zone>. An interval schedule's ticks are
// the multiples of the interval since the Unix epoch (every 3600 s: on each hour, UTC), so the
// ticks of a schedule do not depend on when it was stored. A tick is due from its time on; a
// scheduler enqueues it within about Config.Interval.
//
// # Missed ticks
//
// Ticks come due while no scheduler runs (every reactor down) or while a schedule's effect cannot
// be enqueued. What the next round does with them is the schedule's Missed policy:
//
//   - Skip (the default) enqueues the latest due tick only and drops the earlier ones; the
//     schedule then waits for its next future tick.
//   - CatchUp enqueues each missed tick, oldest first, bounded: only ticks of the last
//     CatchUpWindow (24 h), at most the latest CatchUpMax (1000) of them, in rounds of
//     CatchUpBatch (100) per transaction; older ones are dropped.
//
// # Caveats
//
// A disabled schedule enqueues nothing; enabling it again (Put) starts at its next future tick,
// never replaying the ticks of the time it was disabled. A due tick whose effect the reactor
// cannot enqueue (a connector it does not know, args the connector refuses) stays due: its
// schedule records the error (LastError) and the next round tries again.
package schedule
