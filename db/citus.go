package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Citus cell is a schema of Reckon's tables that Citus places whole on one node of a cluster
// (schema-based sharding, citus_schema_distribute): its tables stay together, so their keys,
// triggers and SKIP LOCKED claims work as on one Postgres, and tenants are spread over the cluster
// by giving cells to them. River's tables cannot live in the cell — Citus refuses River's own
// statements on distributed tables (its fetch and completion put now() inside COALESCE) — so they
// live in the schema RiverSchema names, plain tables on the coordinator, beside the cell on the
// connections' search_path (ConfigureSchema). A transaction that writes both (an enqueue, an
// outcome) is a two-phase commit between the coordinator and the cell's node.
//
// Three things differ from one Postgres, and the migrator sees to them (citusPrepare,
// citusFinish):
//   - Triggers run on the cell's node, in sessions Citus opens, whose search_path is not the
//     client's: every function of the cell is pinned to the cell's search_path.
//   - A transaction that sent a notification cannot be prepared, and a notification sent on a
//     worker reaches no listener on the coordinator: the cell's pg_notify sends only on the
//     coordinator; waiters and reactors fall back on their polling (docs/deploy.md).
//   - Citus must allow the triggers (citus.enable_unsafe_triggers, for the migrator's session).

// riverSchemaSuffix makes the name of a cell's River schema from the cell's.
const riverSchemaSuffix = "_river"

// RiverSchema is where a Citus cell keeps River's tables, on the coordinator: schema + "_river".
// A schema that is not a cell keeps them in itself. ConfigureSchema puts both on the search path.
func RiverSchema(schema string) string { return schema + riverSchemaSuffix }

// citusState is what the migrator finds of Citus for its schema.
type citusState struct {
	// cell: the schema is a Citus cell (distributed, or to be distributed: MigratorConfig.Citus).
	cell bool
	// distributed: Citus already placed the schema (citus_schema_distribute ran).
	distributed bool
}

// citusStatus reports whether m's schema is, or is to become, a Citus cell. A schema that Citus
// already distributed is a cell whatever MigratorConfig.Citus says; MigratorConfig.Citus on a
// database without the citus extension, or on a schema whose River tables are in it (migrated
// without -citus), is an error.
func (m *Migrator) citusStatus(ctx context.Context, conn *pgxpool.Conn) (citusState, error) {
	var state citusState
	if m.schema == "" {
		return state, nil
	}
	if installed, err := citusInstalled(ctx, conn); err != nil || !installed {
		return state, err
	}
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_schema WHERE schemaid = to_regnamespace($1))`,
		m.schema).Scan(&state.distributed); err != nil {
		return state, fmt.Errorf("migrate: look for schema %s among Citus's: %w", m.schema, err)
	}
	state.cell = state.distributed || m.citus
	if state.cell && !state.distributed {
		var riverInCell bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass(format('%I.river_migration', $1::text)) IS NOT NULL`, m.schema).Scan(&riverInCell); err != nil {
			return state, err
		}
		if riverInCell {
			return state, fmt.Errorf("migrate: -citus: schema %s already holds River's tables (it was migrated without -citus); a Citus cell keeps them in %s (docs/deploy.md, Citus cells: moving an existing database onto Citus)",
				m.schema, RiverSchema(m.schema))
		}
	}
	return state, nil
}

// citusInstalled reports whether the database has the citus extension.
func citusInstalled(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var installed bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&installed); err != nil {
		return false, fmt.Errorf("migrate: look for the citus extension: %w", err)
	}
	return installed, nil
}

// errNoCitus is MigratorConfig.Citus on a database without the citus extension.
var errNoCitus = errors.New("migrate: -citus: the database has no citus extension (CREATE EXTENSION citus, on the coordinator)")

// citusPrepare readies conn for migrating a cell: River's schema exists and the session allows
// triggers on distributed tables (the migrations create some) until citusDone.
func (m *Migrator) citusPrepare(ctx context.Context, conn *pgxpool.Conn) error {
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{RiverSchema(m.schema)}.Sanitize()); err != nil {
		return fmt.Errorf("migrate: create schema %s: %w", RiverSchema(m.schema), err)
	}
	if _, err := conn.Exec(ctx, `SET citus.enable_unsafe_triggers = on`); err != nil {
		return fmt.Errorf("migrate: allow triggers on Citus tables: %w", err)
	}
	return nil
}

// citusNotify replaces, for the cell's functions, Postgres's pg_notify by one that sends only
// on the coordinator (see the package's Citus notes).
const citusNotify = `
CREATE OR REPLACE FUNCTION pg_notify(channel text, payload text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- A Citus cell's triggers run on the node that holds the cell: a notification there reaches
    -- no listener (they are on the coordinator), and would forbid the two-phase commit.
    IF citus_is_coordinator() THEN
        PERFORM pg_catalog.pg_notify(channel, payload);
    END IF;
END
$$`

// citusFinish completes a migration of a cell: every function of the cell finds the cell's
// tables, River's and the cell's pg_notify on whichever node runs it, and the schema is
// distributed if it was not yet. Idempotent: Up runs it after every migration of a cell, which
// pins the functions a new migration created.
func (m *Migrator) citusFinish(ctx context.Context, conn *pgxpool.Conn, state citusState) error {
	if !state.distributed {
		if _, err := conn.Exec(ctx, `SELECT citus_schema_distribute($1)`, m.schema); err != nil {
			return fmt.Errorf("migrate: citus_schema_distribute(%s): %w", m.schema, err)
		}
		m.logger.InfoContext(ctx, "distributed the schema: a Citus cell", "schema", m.schema)
	}
	if _, err := conn.Exec(ctx, citusNotify); err != nil {
		return fmt.Errorf("migrate: the cell's pg_notify: %w", err)
	}
	// Distributing a schema copies to the workers the functions its tables depend on (their
	// triggers'), not those the triggers call: every function of the cell goes to every node.
	if _, err := conn.Exec(ctx, `
		SELECT create_distributed_function(p.oid::regprocedure) FROM pg_proc p
		WHERE p.pronamespace = to_regnamespace($1) AND p.prokind = 'f'
		  AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)`, m.schema); err != nil {
		return fmt.Errorf("migrate: copy the cell's functions to the workers: %w", err)
	}
	// pg_catalog last: the cell's pg_notify comes before Postgres's.
	path := pgx.Identifier{m.schema}.Sanitize() + ", " + pgx.Identifier{RiverSchema(m.schema)}.Sanitize() + ", pg_catalog"
	rows, err := conn.Query(ctx, `
		SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = to_regnamespace($1) AND p.prokind = 'f' AND p.proname <> 'pg_notify'
		  AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')`, m.schema)
	if err != nil {
		return fmt.Errorf("migrate: list the cell's functions: %w", err)
	}
	functions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("migrate: list the cell's functions: %w", err)
	}
	for _, function := range functions {
		// regprocedure's text is qualified and quoted as SQL wants it.
		if _, err := conn.Exec(ctx, "ALTER FUNCTION "+function+" SET search_path = "+path); err != nil {
			return fmt.Errorf("migrate: pin the search path of %s: %w", function, err)
		}
	}
	// The audit trail's new partitions get triggers (and their rows moved out of the default
	// partition, with its triggers off for the move): allowed in this function only.
	addPartition := pgx.Identifier{m.schema, "reckon_audit_add_partition"}.Sanitize() + "(text, timestamptz, timestamptz)"
	if _, err := conn.Exec(ctx, "ALTER FUNCTION "+addPartition+" SET citus.enable_unsafe_triggers = on"); err != nil {
		return fmt.Errorf("migrate: allow the audit partitions' triggers: %w", err)
	}
	// An observation is written by a function Citus runs on the cell's worker, from within the
	// statement it sent there (EffectObservationInsert), which Citus refuses unless allowed: the
	// function's insert is local to that node, as a trigger's is.
	observe := pgx.Identifier{m.schema, "reckon_effect_observe"}.Sanitize() + "(uuid, text, text, jsonb)"
	if _, err := conn.Exec(ctx, "ALTER FUNCTION "+observe+" SET citus.allow_nested_distributed_execution = on"); err != nil {
		return fmt.Errorf("migrate: allow the observations' insert: %w", err)
	}
	return nil
}

// citusDone puts back the session setting citusPrepare changed, before conn returns to the pool.
func citusDone(ctx context.Context, conn *pgxpool.Conn) {
	resetCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = conn.Exec(resetCtx, `RESET citus.enable_unsafe_triggers`)
}
