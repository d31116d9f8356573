-- Pending events (docs/async.md): async effects that a connector's upstream accepted and
-- finishes later by callback, and runs with their guardrails.

ALTER TABLE reckon_effects
    -- Set when the upstream accepts the effect (effects.Accepted): the id its callback names. By
    -- default the self-routing "{run}:{effect id}" the connector was given (Call.CorrelationID).
    ADD COLUMN correlation_id text CHECK (correlation_id <> ''),
    -- Per-call override of how long to await the callback (Spec.AsyncTimeout). NULL: the
    -- connector's AsyncTimeout, else the client's default.
    ADD COLUMN async_timeout_ms integer CHECK (async_timeout_ms > 0),
    -- Per-call hard timeout (Spec.AsyncHardTimeout): at the deadline, cancel upstream instead of
    -- only marking the outcome unknown.
    ADD COLUMN async_hard_timeout boolean NOT NULL DEFAULT false;

-- Callbacks find their effect by correlation id. Only accepted effects carry one. Unique per
-- tenant: an upstream's own ids of one tenant never collide with another tenant's.
CREATE UNIQUE INDEX reckon_effects_correlation_idx ON reckon_effects (tenant_id, correlation_id)
    WHERE correlation_id IS NOT NULL;

-- A run groups the effects an agent run (or any unit of work) enqueues, by reckon_effects.run_id.
-- A row appears with the run's first effect (or effects.StartRun, which sets the guardrails);
-- enqueueing into a run locks its row, which serialises the guardrail checks of one run.
CREATE TABLE reckon_runs (
    id                       text PRIMARY KEY CHECK (id <> ''),
    tenant_id                text NOT NULL CHECK (tenant_id <> ''),
    -- Guardrails; NULL: no limit. Enqueueing into a run whose steps (its effects, compensations
    -- excluded) would exceed max_steps, or whose last max_consecutive_failures settled effects
    -- all FAILED, is refused. The counts are read from reckon_effects (query RunStats) while this
    -- row is locked, so that they cost nothing on the dispatch path and cannot drift.
    max_steps                integer CHECK (max_steps > 0),
    max_consecutive_failures integer CHECK (max_consecutive_failures > 0),
    cancelled_at             timestamptz,
    cancelled_by             text,
    cancel_reason            text,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reckon_runs_tenant_created_idx ON reckon_runs (tenant_id, created_at);
