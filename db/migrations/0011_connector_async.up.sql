-- Async settings of HTTP connectors (docs/async.md): what effects.Connector's AsyncTimeout,
-- HardTimeout and Cancel are to a Go connector.
ALTER TABLE reckon_connectors
    -- How long an effect whose dispatch answered 202 awaits its callback. NULL: the reactor's
    -- -async-timeout. At most 7 days, effects' bound of every async timeout.
    ADD COLUMN async_timeout_ms integer CHECK (async_timeout_ms BETWEEN 1 AND 604800000),
    -- A passed deadline calls cancel_url (FAILED once the upstream confirms) instead of only
    -- making the outcome UNKNOWN (the soft timeout).
    ADD COLUMN hard_timeout     boolean NOT NULL DEFAULT false,
    -- URL of the calls that ask the upstream to abandon an accepted operation (hard timeouts,
    -- cancelled runs).
    ADD COLUMN cancel_url       text CHECK (cancel_url <> '');
