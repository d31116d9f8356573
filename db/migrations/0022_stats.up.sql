-- Shared statistics (issue 18): the counts behind the gauges reckon_effects{state},
-- reckon_effects_oldest_pending_seconds{connector} and reckon_sagas{name,state}, computed once per
-- interval (effects.Config.StatsInterval, 15 s) by one reactor for the whole fleet instead of by
-- every reactor at every scrape. Each part of the statistics (effects, sagas — one per package that
-- contributes) is a row. A reactor computes a part in one transaction that first claims the row:
-- an UPDATE of computed_at that matches only when the row was computed at least an interval ago
-- and is not locked by a computation in progress (FOR UPDATE SKIP LOCKED), so one reactor per
-- interval wins and the others skip it without waiting; a computation that fails or whose process
-- dies rolls back and another reactor claims the row at its next try. Every process's collector
-- reads the rows at scrape time (a primary-key read). See docs/design.md, "Shared statistics".
CREATE TABLE reckon_stats (
    part        text PRIMARY KEY CHECK (part <> ''),
    -- When the value was computed (the computing transaction's start; '-infinity' before the first
    -- computation), and by which reactor (effects.Config.ID).
    computed_at timestamptz NOT NULL DEFAULT '-infinity',
    computed_by text NOT NULL DEFAULT '',
    -- The part's numbers, as its package writes them (NULL before the first computation).
    value       jsonb
);
