-- Pending events (DESIGN.md section 7): async effects that a connector's upstream accepted and
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

-- Callbacks find their effect by correlation id. Only accepted effects carry one.
CREATE UNIQUE INDEX reckon_effects_correlation_idx ON reckon_effects (correlation_id)
    WHERE correlation_id IS NOT NULL;

-- A run groups the effects an agent run (or any unit of work) enqueues, by reckon_effects.run_id.
-- A row appears with the run's first effect (or effects.StartRun, which sets the guardrails).
CREATE TABLE reckon_runs (
    id                       text PRIMARY KEY CHECK (id <> ''),
    tenant_id                text NOT NULL CHECK (tenant_id <> ''),
    -- Guardrails; NULL: no limit. Enqueueing into a run whose steps would exceed max_steps, or
    -- whose consecutive_failures reached max_consecutive_failures, is refused.
    max_steps                integer CHECK (max_steps > 0),
    max_consecutive_failures integer CHECK (max_consecutive_failures > 0),
    -- Effects enqueued into the run (compensations excluded), counted by reckon_run_count_step.
    steps                    integer NOT NULL DEFAULT 0 CHECK (steps >= 0),
    -- Effects of the run that became FAILED since the last one that became CONFIRMED, and all the
    -- FAILED ones, counted by reckon_run_count_outcome.
    consecutive_failures     integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    failures                 integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    cancelled_at             timestamptz,
    cancelled_by             text,
    cancel_reason            text,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX reckon_runs_tenant_created_idx ON reckon_runs (tenant_id, created_at);

-- Every effect inserted into a run is a step of it (whichever path inserted it). Effects whose
-- idempotency key existed are not inserted, so replays are not counted.
CREATE FUNCTION reckon_run_count_step() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO reckon_runs AS r (id, tenant_id, steps) VALUES (NEW.run_id, NEW.tenant_id, 1)
    ON CONFLICT (id) DO UPDATE SET steps = r.steps + 1, updated_at = now();
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_run_count_step
    AFTER INSERT ON reckon_effects
    FOR EACH ROW WHEN (NEW.run_id IS NOT NULL AND NEW.compensates_id IS NULL)
    EXECUTE FUNCTION reckon_run_count_step();

-- An effect of a run that becomes FAILED adds a consecutive failure; one that becomes CONFIRMED
-- ends the streak. Runs on every path that settles effects (settle, group commit, operators).
CREATE FUNCTION reckon_run_count_outcome() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE reckon_runs
    SET consecutive_failures = CASE WHEN NEW.state = 'FAILED' THEN consecutive_failures + 1 ELSE 0 END,
        failures = failures + CASE WHEN NEW.state = 'FAILED' THEN 1 ELSE 0 END,
        updated_at = now()
    WHERE id = NEW.run_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_run_count_outcome
    AFTER UPDATE OF state ON reckon_effects
    FOR EACH ROW WHEN (
        NEW.run_id IS NOT NULL AND NEW.compensates_id IS NULL
        AND OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('CONFIRMED', 'FAILED')
    )
    EXECUTE FUNCTION reckon_run_count_outcome();
