-- Postgres's pg_locks view and pg_database catalog as our queries see them, for sqlc only (its
-- catalog lacks them). Never applied: at run time the queries read pg_catalog's own.
CREATE TABLE pg_locks (
    locktype text,
    database oid,
    classid  oid,
    objid    oid,
    objsubid smallint,
    pid      integer,
    mode     text,
    granted  boolean
);

CREATE TABLE pg_database (
    oid     oid,
    datname text
);
