-- Going down forgets the HTTP connectors' confirmation holds and limits: their effects are then
-- dispatched without a confirmation and without limits (an operator's limit still applies).
ALTER TABLE reckon_connectors
    DROP COLUMN IF EXISTS limit_break_for_ms,
    DROP COLUMN IF EXISTS limit_break_after,
    DROP COLUMN IF EXISTS limit_per_tenant,
    DROP COLUMN IF EXISTS limit_max_in_flight,
    DROP COLUMN IF EXISTS limit_burst,
    DROP COLUMN IF EXISTS limit_per_ms,
    DROP COLUMN IF EXISTS limit_rate,
    DROP COLUMN IF EXISTS confirmation_prompt,
    DROP COLUMN IF EXISTS requires_confirmation;
