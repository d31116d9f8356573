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

-- pg_class and pg_inherits, for the sizes `server retention status` shows.
CREATE TABLE pg_class (
    oid       oid,
    relname   text,
    relkind   text,
    reltuples real
);

CREATE TABLE pg_inherits (
    inhrelid  oid,
    inhparent oid
);
