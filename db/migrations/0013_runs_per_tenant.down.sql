-- Run ids become global again. That is only possible while no run id is used by two tenants
-- (their runs, or their effects' run_id): otherwise this refuses, changing nothing, and names one
-- such id.
DO $$
DECLARE
    shared text;
BEGIN
    SELECT run_id INTO shared
    FROM (
        SELECT id AS run_id, tenant_id FROM reckon_runs
        UNION
        SELECT run_id, tenant_id FROM reckon_effects WHERE run_id IS NOT NULL
    ) runs
    GROUP BY run_id
    HAVING count(DISTINCT tenant_id) > 1
    ORDER BY run_id
    LIMIT 1;
    IF shared IS NOT NULL THEN
        RAISE EXCEPTION 'reckon: run ids cannot become global again: run id % is used by more than one tenant', shared
            USING ERRCODE = 'unique_violation',
                  HINT = 'give the runs of all but one tenant other ids (reckon_runs.id and reckon_effects.run_id), then migrate down again';
    END IF;
END;
$$;

DROP INDEX reckon_effects_run_idx;
CREATE INDEX reckon_effects_run_idx ON reckon_effects (run_id) WHERE run_id IS NOT NULL;

ALTER TABLE reckon_runs
    DROP CONSTRAINT reckon_runs_pkey,
    ADD PRIMARY KEY (id);
