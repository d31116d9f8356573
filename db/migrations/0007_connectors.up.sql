-- HTTP connectors (docs/connectors.md): connectors for services not written in Go, stored as rows
-- and loaded by every reactor (package effects/httpconn). A row holds what effects.Connector holds
-- for a Go connector, with URLs in place of functions. Connectors are shared by all tenants, like
-- the Go connectors a reactor registers.

CREATE TABLE reckon_connectors (
    name                text PRIMARY KEY CHECK (name <> '' AND length(name) <= 200),
    tags                text[] NOT NULL DEFAULT '{}' CHECK (
        tags <@ ARRAY['read', 'write', 'idempotent', 'destructive', 'external', 'expensive', 'network']
    ),
    dispatch_url        text NOT NULL CHECK (dispatch_url <> ''),
    status_url          text CHECK (status_url <> ''),
    compensate_url      text CHECK (compensate_url <> ''),
    -- Top-level fields of an effect's args joined with ':' to make its business key when the
    -- enqueuer gives none, e.g. {account,amount,date} → "acc-1:100:2026-11-22".
    business_key_fields text[] NOT NULL DEFAULT '{}',
    timeout_ms          integer NOT NULL CHECK (timeout_ms BETWEEN 1 AND 300000),
    max_attempts        integer NOT NULL CHECK (max_attempts >= 1),
    status_check_limit  integer NOT NULL CHECK (status_check_limit >= 1),
    backoff_initial_ms  integer NOT NULL CHECK (backoff_initial_ms >= 1),
    backoff_max_ms      integer NOT NULL CHECK (backoff_max_ms >= backoff_initial_ms),
    unsafe              boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
