-- What the reactors need to dispatch, reconcile and compensate effects (docs/design.md, the dispatch protocol).

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

-- Effects.Wait and the completion gate listen on reckon_effect_settled: the ids of the effects
-- that have just become CONFIRMED, FAILED or STUCK, comma-separated, delivered when the
-- transaction commits. One notification per statement (a batch of outcomes is one statement),
-- split to stay under the 8000-byte payload limit.
CREATE FUNCTION reckon_effect_notify_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    payload text;
BEGIN
    FOR payload IN
        SELECT string_agg(n.id::text, ',')
        FROM (
            SELECT n.id, (row_number() OVER () - 1) / 200 AS chunk
            FROM new_rows n JOIN old_rows o ON o.id = n.id
            WHERE o.state IS DISTINCT FROM n.state AND n.state IN ('CONFIRMED', 'FAILED', 'STUCK')
        ) n
        GROUP BY n.chunk
    LOOP
        PERFORM pg_notify('reckon_effect_settled', payload);
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER reckon_effect_settled
    AFTER UPDATE ON reckon_effects
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION reckon_effect_notify_settled();
