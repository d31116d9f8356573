-- What the reactors need to dispatch, reconcile and compensate effects (DESIGN.md section 3).

ALTER TABLE reckon_effects
    -- The River job now responsible for the effect: its dispatch job while PENDING, its reconcile
    -- job while UNKNOWN. A worker writes an outcome only while the effect still points at its job
    -- (the fence); every transition that hands the effect to a new job sets it in the same
    -- statement. NULL for an inline (Do) attempt, which is fenced by its lease instead.
    ADD COLUMN job_id bigint,
    -- The connector's call timeout when the effect was enqueued. An attempt whose job has been
    -- running longer than this plus the reactor's margin is presumed dead by the sweeper.
    ADD COLUMN timeout_ms integer NOT NULL DEFAULT 30000 CHECK (timeout_ms > 0),
    -- For a compensation: the effect it undoes.
    ADD COLUMN compensates_id uuid REFERENCES reckon_effects (id);

CREATE INDEX reckon_effects_compensates_idx ON reckon_effects (compensates_id) WHERE compensates_id IS NOT NULL;
CREATE INDEX reckon_effects_lease_idx ON reckon_effects (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX reckon_effects_created_idx ON reckon_effects (tenant_id, created_at, id);

-- Effects.Wait and the completion gate listen on reckon_effect_settled: the id of every effect that
-- has just become CONFIRMED, FAILED or STUCK, delivered when the transaction commits.
CREATE FUNCTION reckon_effect_notify_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('reckon_effect_settled', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_effect_settled
    AFTER UPDATE ON reckon_effects
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('CONFIRMED', 'FAILED', 'STUCK'))
    EXECUTE FUNCTION reckon_effect_notify_settled();
