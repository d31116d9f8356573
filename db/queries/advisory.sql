-- Two-key advisory locks keyed by a namespace and the hash of a name:
-- (namespace, hashtext(name)). internal/postgres.AdvisoryLock runs these; see it for which scope
-- to use when.

-- name: AdvisoryLock :exec
-- Takes the lock for the session, waiting while another session or transaction holds it (up to
-- the session's lock_timeout). pg_advisory_unlock or the end of the session frees it.
SELECT pg_advisory_lock(@namespace::integer, hashtext(@name::text));

-- name: AdvisoryTryLock :one
-- Takes the lock for the session if nobody holds it; false, and nothing held, otherwise.
SELECT pg_try_advisory_lock(@namespace::integer, hashtext(@name::text))::boolean AS locked;

-- name: AdvisoryUnlock :one
-- Frees one hold of the session's lock; false when this session did not hold it.
SELECT pg_advisory_unlock(@namespace::integer, hashtext(@name::text))::boolean AS unlocked;

-- name: AdvisoryXactLock :exec
-- Takes the lock until the caller's transaction ends, waiting while another holds it.
SELECT pg_advisory_xact_lock(@namespace::integer, hashtext(@name::text));

-- name: AdvisoryTryXactLock :one
-- Takes the lock until the caller's transaction ends if nobody holds it; false otherwise.
SELECT pg_try_advisory_xact_lock(@namespace::integer, hashtext(@name::text))::boolean AS locked;
