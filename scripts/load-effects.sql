-- Loads a large, realistic effects table for measuring operators' pages (issue 17): by default
-- 1,000,000 effects over the last 30 days, across 5 tenants and 6 connectors, each with its
-- history — about 100 STUCK, 2,000 PENDING and 1,000 UNKNOWN (created in the last two hours), 3%
-- FAILED, the rest CONFIRMED; a business key on a third, a run on a tenth, a turn on a twentieth,
-- a compensation for one in a thousand. Then VACUUM ANALYZE, as a long-lived database would be.
--
-- Run on a migrated database that may already hold effects (it adds to them), as a superuser (it
-- writes the rows in their final states with triggers off, session_replication_role = replica):
--
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f scripts/load-effects.sql
--   PGOPTIONS='-c reckon.load_n=100000 -c reckon.load_tenants=3' psql "$DATABASE_URL" -f scripts/load-effects.sql
--
-- Settings (PGOPTIONS or SET): reckon.load_n (1000000), reckon.load_tenants (5), reckon.load_days
-- (30). Takes about a minute per million effects here.

BEGIN;
SET LOCAL session_replication_role = replica;

CREATE TEMPORARY TABLE load_settings ON COMMIT DROP AS
SELECT coalesce(nullif(current_setting('reckon.load_n', true), ''), '1000000')::integer AS n,
       coalesce(nullif(current_setting('reckon.load_tenants', true), ''), '5')::integer AS tenants,
       coalesce(nullif(current_setting('reckon.load_days', true), ''), '30')::integer AS days,
       (SELECT count(*) FROM reckon_effects) AS base;

CREATE TEMPORARY TABLE load_effects ON COMMIT DROP AS
SELECT gen_random_uuid() AS id,
       'tenant-' || (g % s.tenants) AS tenant_id,
       (ARRAY['bank.wire', 'mail.send', 'crm.update', 'sms.send', 'ledger.post', 'search.index'])[1 + g % 6] AS connector,
       'load-' || (s.base + g) AS idempotency_key,
       CASE WHEN g % 3 = 0 THEN 'order-' || (g / 3) END AS business_key,
       CASE WHEN g % 10 = 0 THEN 'run-' || (g / 100) END AS run_id,
       CASE WHEN g % 20 = 0 THEN md5('turn-' || (g / 40))::uuid END AS turn_id,
       CASE WHEN g % 10000 = 5000 THEN 'STUCK'
            WHEN g % 500 = 1 THEN 'PENDING'
            WHEN g % 1000 = 2 THEN 'UNKNOWN'
            WHEN g % 33 = 3 THEN 'FAILED'
            ELSE 'CONFIRMED' END::reckon_effect_state AS state,
       CASE WHEN g % 500 = 1 OR g % 1000 = 2 THEN now() - random() * interval '2 hours'
            ELSE now() - random() * s.days * interval '1 day' END AS created_at
FROM load_settings s, generate_series(1, s.n) AS g;

INSERT INTO reckon_effects (id, tenant_id, connector, args, idempotency_key, business_key, policy, tags, state, attempts,
                            result, error, run_id, turn_id, turn_group, created_at, updated_at)
SELECT id, tenant_id, connector, jsonb_build_object('amount', 100, 'to', idempotency_key), idempotency_key, business_key,
       'idempotent', ARRAY['write', 'external'], state, CASE WHEN state = 'PENDING' THEN 0 ELSE 1 END,
       CASE WHEN state = 'CONFIRMED' THEN '{"ok": true}'::jsonb END,
       CASE WHEN state IN ('FAILED', 'STUCK', 'UNKNOWN') THEN 'upstream said no' END,
       run_id, turn_id, CASE WHEN turn_id IS NOT NULL THEN turn_id::text END,
       created_at, CASE WHEN state = 'PENDING' THEN created_at ELSE created_at + interval '2 seconds' END
FROM load_effects;

-- One in a thousand CONFIRMED wires has a compensation (CONFIRMED too).
INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, state, attempts, compensates_id, created_at, updated_at)
SELECT gen_random_uuid(), tenant_id, connector, idempotency_key || '/compensate', 'idempotent', 'CONFIRMED', 1, id,
       created_at + interval '1 minute', created_at + interval '1 minute'
FROM load_effects WHERE state = 'CONFIRMED' AND connector = 'bank.wire' AND (hashtext(id::text) % 1000) = 0;

INSERT INTO reckon_effect_transitions (effect_id, tenant_id, from_state, to_state, actor, reason, attempt, at)
SELECT id, tenant_id, NULL::reckon_effect_state, 'PENDING'::reckon_effect_state, 'load', 'enqueued', 0, created_at FROM load_effects
UNION ALL
SELECT id, tenant_id, 'PENDING', CASE WHEN state = 'STUCK' THEN 'UNKNOWN' ELSE state END::reckon_effect_state, 'reactor:load', 'attempt 1', 1,
       created_at + interval '1 second'
FROM load_effects WHERE state <> 'PENDING'
UNION ALL
SELECT id, tenant_id, 'UNKNOWN', 'STUCK', 'reactor:load', 'status checks inconclusive', 1, created_at + interval '2 seconds'
FROM load_effects WHERE state = 'STUCK';

COMMIT;

VACUUM ANALYZE reckon_effects;
VACUUM ANALYZE reckon_effect_transitions;
