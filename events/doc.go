// Package events reads Reckon's event stream: one durable, ordered log per database of what happens
// to turns, supersede decisions, commits, effects, sagas and runs (docs/events.md lists every type).
//
// # Writing
//
// The database writes the events itself: triggers on the engine's tables (migration 0027) add an
// event to reckon_events in the same transaction as the change it reports. An event exists if and
// only if its change committed; a transaction that rolls back leaves none. Types are
// {category}.{name}: turn.started, turn.completed, supersede.decision, commit.reached,
// tool.authorized, tool.executed, effect.stuck, saga.compensated, run.cancelled…
//
// # Order
//
// An event's ID is its position: the id of the transaction that wrote it, then a sequence number.
// A transaction's id is taken when it first writes, so a transaction that started writing earlier
// may commit later, with a smaller position than events already committed. Readers therefore read
// only the events of transactions older than the oldest one still running: those have all ended,
// so no event can later appear behind a position a reader has passed. A transaction that commits
// late holds readers back until it ends instead of landing behind them. The price: a long-running
// writing transaction anywhere in the cluster delays every reader until it ends.
//
// # Reading
//
// Log.Read returns a page of events and the position to read after next; Log.Subscribe yields
// events as they are written, woken by the database's notifications (events other than effect
// transitions, and effects that settle) and looking every PollInterval (250 ms) besides. A subscriber that stores the ID of the last event it handled and resumes after it
// misses none and sees none twice. Filter selects types by pattern ("*", "turn.*",
// "turn.superseded") and one tenant's events.
//
// Events are kept in monthly partitions that retention drops once older than its events retention
// (retention.Config); reading after a position retention has dropped fails with ErrExpired rather
// than skipping events silently.
//
// # Webhooks
//
// Subscriptions stores webhook subscriptions (a URL, patterns, one tenant's events or every
// tenant's); Webhooks, a plugin of the reactors' effects client, delivers them as effects of the
// built-in connector WebhookConnector: batches in log order, one in flight per subscription, retried
// with backoff, a subscription paused when a delivery ends FAILED or STUCK and resumed from that
// batch. Retention keeps the events an active subscription has not delivered yet.
package events
