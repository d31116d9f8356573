-- Run ids are scoped per tenant, like idempotency keys and correlation ids: a run is the tenant's
-- run of that id. Two tenants naming the same run id get two runs, each with its own guardrails,
-- cancellation and counts, and neither can learn that the other's exists. Existing runs keep their
-- rows: run ids were global until now, so no two rows share an id, and the effects of a run all
-- belong to the run's tenant (an effect of another tenant could not join it).
ALTER TABLE reckon_runs
    DROP CONSTRAINT reckon_runs_pkey,
    ADD PRIMARY KEY (tenant_id, id);

-- The effects of a run are found by (tenant_id, run_id): the guardrail counts read while an
-- enqueue holds the run's row, the completion gate, the status and the cancellation.
DROP INDEX reckon_effects_run_idx;
CREATE INDEX reckon_effects_run_idx ON reckon_effects (tenant_id, run_id) WHERE run_id IS NOT NULL;
