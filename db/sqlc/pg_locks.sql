-- Postgres's pg_locks view and pg_database as our queries see them (sqlc only: sqlc's catalog lacks it). Never
-- applied to a database: at run time the query reads pg_catalog.pg_locks.
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
