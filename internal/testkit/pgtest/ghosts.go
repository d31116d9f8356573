package pgtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Ghost is a row of history or of the event stream about an effect, saga, turn or run that never
// existed: a record of a change that did not happen (docs/audit.md).
type Ghost struct {
	// Table is where the row is: reckon_effect_transitions, reckon_saga_transitions or reckon_events.
	Table string
	// Row is its id (reckon_events: its seq).
	Row int64
	// Kind is what it is about: effect, saga, turn or run.
	Kind string
	// Entity is the id of what it is about.
	Entity string
	// What says what the row records: the transition or the event type.
	What string
}

func (g Ghost) String() string {
	return fmt.Sprintf("%s row %d: %s about %s %s, which never existed", g.Table, g.Row, g.What, g.Kind, g.Entity)
}

// ghostsSQL finds the ghosts of a database. What the engine deletes on purpose is told apart from
// what never existed:
//   - effects: retention prunes only settled effects, so a pruned effect's history holds its
//     CONFIRMED or FAILED transition; or it left a tombstone; or retention dropped a partition of
//     its history written after the row. Rows marked by migration 0031 (reckon_audit_ghosts) are
//     ghosts found and accounted for.
//   - sagas: retention prunes only COMPLETED or COMPENSATED sagas, whose history says so, unless
//     a later partition of it was dropped; a saga is gone only by retention (a retention run is
//     recorded: tests make settled sagas without their history).
//   - turns: a turn deleted while it was still accumulating messages never started; one that
//     started is gone only by retention (a retention run is recorded).
//   - runs: run.* events of a run that is gone only by retention.
const ghostsSQL = `
WITH retention AS (SELECT EXISTS (SELECT 1 FROM reckon_retention_runs WHERE NOT dry_run) AS ran)
SELECT 'reckon_effect_transitions', t.id, 'effect', t.effect_id::text,
       coalesce(t.from_state::text, '(new)') || ' -> ' || t.to_state::text
FROM reckon_effect_transitions t
WHERE NOT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.id = t.effect_id)
  AND NOT EXISTS (SELECT 1 FROM reckon_audit_ghosts g WHERE g.transition_id = t.id)
  AND NOT EXISTS (SELECT 1 FROM reckon_effect_transitions s WHERE s.effect_id = t.effect_id AND s.to_state IN ('CONFIRMED', 'FAILED'))
  AND NOT EXISTS (SELECT 1 FROM reckon_effect_tombstones tb WHERE tb.effect_id = t.effect_id)
  AND NOT EXISTS (SELECT 1 FROM reckon_audit_drops d WHERE d.parent = 'reckon_effect_transitions' AND d.range_to > t.at)
UNION ALL
SELECT 'reckon_events', ev.seq, 'effect', ev.effect_id::text, ev.type
FROM reckon_events ev
WHERE ev.effect_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reckon_effects e WHERE e.id = ev.effect_id)
  AND NOT EXISTS (SELECT 1 FROM reckon_effect_transitions s WHERE s.effect_id = ev.effect_id AND s.to_state IN ('CONFIRMED', 'FAILED'))
  AND NOT EXISTS (SELECT 1 FROM reckon_effect_tombstones tb WHERE tb.effect_id = ev.effect_id)
  AND NOT EXISTS (SELECT 1 FROM reckon_audit_drops d WHERE d.parent = 'reckon_effect_transitions' AND d.range_to > ev.at)
UNION ALL
SELECT h.tbl, h.row, 'saga', h.saga_id::text, h.what
FROM (
    SELECT 'reckon_saga_transitions' AS tbl, t.id AS row, t.saga_id, t.at,
           coalesce(t.from_state::text, '(new)') || ' -> ' || t.to_state::text AS what
    FROM reckon_saga_transitions t
    UNION ALL
    SELECT 'reckon_events', ev.seq, ev.saga_id, ev.at, ev.type
    FROM reckon_events ev
    WHERE ev.saga_id IS NOT NULL
) h, retention
WHERE NOT retention.ran
  AND NOT EXISTS (SELECT 1 FROM reckon_sagas s WHERE s.id = h.saga_id)
  AND NOT EXISTS (SELECT 1 FROM reckon_saga_transitions x WHERE x.saga_id = h.saga_id AND x.to_state IN ('COMPLETED', 'COMPENSATED'))
  AND NOT EXISTS (SELECT 1 FROM reckon_audit_drops d WHERE d.parent = 'reckon_saga_transitions' AND d.range_to > h.at)
UNION ALL
SELECT 'reckon_events', ev.seq, 'turn', ev.turn_id::text, ev.type
FROM reckon_events ev, retention
WHERE ev.turn_id IS NOT NULL AND ev.effect_id IS NULL AND NOT retention.ran
  AND NOT EXISTS (SELECT 1 FROM reckon_turns t WHERE t.id = ev.turn_id)
  AND EXISTS (SELECT 1 FROM reckon_events st WHERE st.turn_id = ev.turn_id AND st.type = 'turn.started')
UNION ALL
SELECT 'reckon_events', ev.seq, 'run', ev.run_id, ev.type
FROM reckon_events ev, retention
WHERE ev.type LIKE 'run.%' AND NOT retention.ran
  AND NOT EXISTS (SELECT 1 FROM reckon_runs r WHERE r.tenant_id = ev.tenant_id AND r.id = ev.run_id)
ORDER BY 1, 2`

// Ghosts returns the ghosts of the database conn is connected to: every row of history or of the
// event stream about an effect, saga, turn or run that never existed. Use RequireNoGhosts in a
// test.
func Ghosts(ctx context.Context, conn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) ([]Ghost, error) {
	rows, err := conn.Query(ctx, ghostsSQL)
	if err != nil {
		return nil, fmt.Errorf("scan for ghosts: %w", err)
	}
	ghosts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Ghost, error) {
		var g Ghost
		err := row.Scan(&g.Table, &g.Row, &g.Kind, &g.Entity, &g.What)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan for ghosts: %w", err)
	}
	return ghosts, nil
}

// RequireNoGhosts fails the test if the database conn is connected to holds a ghost (Ghosts).
func RequireNoGhosts(tb testing.TB, conn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ghosts, err := Ghosts(ctx, conn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	if len(ghosts) > 0 {
		tb.Fatalf("pgtest: %s", describeGhosts(ghosts))
	}
}

func describeGhosts(ghosts []Ghost) string {
	lines := make([]string, 0, len(ghosts))
	for _, g := range ghosts {
		lines = append(lines, "  "+g.String())
	}
	return fmt.Sprintf("%d rows about changes that did not happen (docs/audit.md):\n%s", len(ghosts), strings.Join(lines, "\n"))
}

// ghostsAllowed holds the tests whose databases are not scanned for ghosts when they end.
var ghostsAllowed sync.Map // testing.TB → reason

// AllowGhosts stops the scan for ghosts that NewDB runs when tb ends (tb: the test that called
// NewDB), for a test that writes history or events about what never existed on purpose (rows
// inserted by hand, rows deleted to stand for retention). reason says why.
func AllowGhosts(tb testing.TB, reason string) {
	tb.Helper()
	if reason == "" {
		tb.Fatal("pgtest: AllowGhosts needs a reason")
	}
	ghostsAllowed.Store(tb, reason)
}

// checkGhostsAtEnd scans the database of connString for ghosts when a test ends and fails the test
// on any. It stays quiet when the test failed already (its own failure says more), when the
// database cannot be reached or does not have the current schema (a test of migrations, or one
// that stopped the server): it is a check of the engine, never a cause of flaky tests.
func checkGhostsAtEnd(tb testing.TB, connString string) {
	if tb.Failed() {
		return
	}
	if _, allowed := ghostsAllowed.LoadAndDelete(tb); allowed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		tb.Logf("pgtest: no scan for ghosts: %v", err)
		return
	}
	defer conn.Close(ctx)
	ghosts, err := Ghosts(ctx, conn)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.UndefinedTable || pgErr.Code == pgerrcode.UndefinedColumn):
		return // not the current schema
	case err != nil:
		tb.Logf("pgtest: no scan for ghosts: %v", err)
	case len(ghosts) > 0:
		tb.Errorf("pgtest: when the test ended, its database held %s\n(a test that writes such rows on purpose calls pgtest.AllowGhosts)", describeGhosts(ghosts))
	}
}
