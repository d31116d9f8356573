// Package db holds Reckon's schema: the SQL migrations in db/migrations, embedded into every
// binary, and the Migrator that applies them together with River's own migrations.
//
// Several processes may migrate the same database at once (deploys often start several): the
// Migrator serializes them with a Postgres advisory lock, so each migration is applied exactly
// once, in its own transaction together with the row that records it (or, for the few that cannot
// run in a transaction, statement by statement before that row: see Migration).
package db

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// AdvisoryLockNamespace is the first key of every two-key advisory lock Reckon takes
// (pg_advisory_lock(AdvisoryLockNamespace, key)); it keeps Reckon's locks apart from an
// application's own. The second key names the lock: see LockKeyMigrate.
const AdvisoryLockNamespace int32 = 0x52434b4e // "RCKN"

// LockKeyMigrate is the second advisory lock key, held while migrating.
const LockKeyMigrate int32 = 1

// LockKeyRetention is the second advisory lock key, held by a retention run (package retention) on
// a connection of its own for the whole run, so that one run at a time prunes a database whichever
// process starts it; a run that finds it taken ends at once (retention.ErrBusy).
const LockKeyRetention int32 = 2

// Migration is one numbered schema change of Reckon's own, with its up and down SQL.
//
// A migration runs in one transaction together with the row that records it, unless both its files
// start with the line "-- reckon:no-transaction" (NoTransaction), for statements that refuse to run
// in a transaction, such as CREATE INDEX CONCURRENTLY. The marker belongs to the migration, not to
// one file: ParseMigrations refuses it in one of the two files only, or anywhere but a file's first
// line. Such a migration still runs under the migration lock, but one statement at a time and
// outside any transaction; its version is recorded (Up) or removed (Down) only after its last
// statement succeeded. A failure leaves the statements before it done and the version as it was,
// and the next run runs the whole file again, so every statement must be safe to run twice (IF NOT
// EXISTS, IF EXISTS). A CREATE INDEX CONCURRENTLY that failed leaves an INVALID index behind, which
// IF NOT EXISTS would keep: precede it with DROP INDEX CONCURRENTLY IF EXISTS. That drop costs
// nothing on a first run, and the file runs again only after a failure, so an index is never
// rebuilt twice for nothing.
//
// Such a file is split into statements by a rule simpler than SQL's: a statement ends at a line
// that ends with ";". Lines starting with "--" are comments. A ";" anywhere else (mid-line, before
// a comment), dollar quotes ($$, $body$: no function bodies, no DO blocks) and block comments are
// refused, because the split cannot see into them.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
	// NoTransaction: both files start with "-- reckon:no-transaction"; see above.
	NoTransaction bool
}

// noTransactionMarker, as the whole first line of both files of a migration, makes it NoTransaction.
const noTransactionMarker = "-- reckon:no-transaction"

var migrationFileRE = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migrations returns Reckon's migrations in version order. Versions start at 1 and are unique;
// every migration has both an up and a down file. Gaps are allowed: migration numbers are
// reserved for features developed in parallel, and a build may lack some of them.
func Migrations() ([]Migration, error) {
	return ParseMigrations(migrationsFS, "migrations")
}

// ParseMigrations reads migrations named NNNN_name.up.sql and NNNN_name.down.sql from dir in fsys
// and checks them as Migrations describes.
func ParseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	type files struct {
		Migration
		upMarked, downMarked bool
	}
	byVersion := map[int]*files{}
	for _, entry := range entries {
		match := migrationFileRE.FindStringSubmatch(entry.Name())
		if match == nil {
			return nil, fmt.Errorf("migration file %q: name must look like 0001_name.up.sql or 0001_name.down.sql", entry.Name())
		}
		version, _ := strconv.Atoi(match[1])
		sql, err := fs.ReadFile(fsys, dir+"/"+entry.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", entry.Name(), err)
		}
		marked, err := noTransactionMarked(string(sql))
		if err != nil {
			return nil, fmt.Errorf("migration file %s: %w", entry.Name(), err)
		}
		m := byVersion[version]
		if m == nil {
			m = &files{Migration: Migration{Version: version, Name: match[2]}}
			byVersion[version] = m
		}
		if m.Name != match[2] {
			return nil, fmt.Errorf("migration %04d has two names: %q and %q", version, m.Name, match[2])
		}
		if match[3] == "up" {
			m.Up, m.upMarked = string(sql), marked
		} else {
			m.Down, m.downMarked = string(sql), marked
		}
	}
	sorted := make([]*files, 0, len(byVersion))
	for _, m := range byVersion {
		sorted = append(sorted, m)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Version < sorted[j].Version })
	migrations := make([]Migration, 0, len(sorted))
	for _, m := range sorted {
		if m.Version < 1 {
			return nil, fmt.Errorf("migration versions start at 0001, found %04d_%s", m.Version, m.Name)
		}
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %04d_%s needs both an .up.sql and a .down.sql file", m.Version, m.Name)
		}
		if m.upMarked != m.downMarked {
			return nil, fmt.Errorf("migration %04d_%s: %q starts only one of its files; a migration runs outside a transaction only when both its .up.sql and .down.sql start with it",
				m.Version, m.Name, noTransactionMarker)
		}
		m.NoTransaction = m.upMarked
		if m.NoTransaction {
			if _, err := splitStatements(m.Up); err != nil {
				return nil, fmt.Errorf("migration file %04d_%s.up.sql (no transaction): %w", m.Version, m.Name, err)
			}
			if _, err := splitStatements(m.Down); err != nil {
				return nil, fmt.Errorf("migration file %04d_%s.down.sql (no transaction): %w", m.Version, m.Name, err)
			}
		}
		migrations = append(migrations, m.Migration)
	}
	return migrations, nil
}

// noTransactionMarked reports whether sql starts with the line noTransactionMarker. The marker
// anywhere else is an error: a marker that did nothing would run the file in a transaction.
func noTransactionMarked(sql string) (bool, error) {
	first, rest, _ := strings.Cut(sql, "\n")
	marked := strings.TrimSpace(first) == noTransactionMarker
	if strings.Contains(rest, "reckon:no-transaction") || (!marked && strings.Contains(first, "reckon:no-transaction")) {
		return false, fmt.Errorf("%q must be the whole first line of the file, and appear nowhere else", noTransactionMarker)
	}
	return marked, nil
}

// dollarQuoteRE finds a dollar quote's opening: $$ or $tag$.
var dollarQuoteRE = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)?\$`)

// splitStatements splits the SQL of a NoTransaction migration into its statements, by the rule
// Migration describes: a statement ends at a line ending with ";", lines starting with "--" are
// comments (left out), and what the rule cannot split safely is refused.
func splitStatements(sql string) ([]string, error) {
	if quote := dollarQuoteRE.FindString(sql); quote != "" {
		return nil, fmt.Errorf("dollar quote %s: a file run outside a transaction is split at \";\" and cannot hold a function body or DO block; move it to a migration of its own", quote)
	}
	if strings.Contains(sql, "/*") {
		return nil, errors.New("block comment /*: a file run outside a transaction is split at \";\"; use -- comments")
	}
	var statements, current []string
	for i, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		if semicolon := strings.IndexByte(trimmed, ';'); semicolon >= 0 && semicolon < len(trimmed)-1 {
			return nil, fmt.Errorf("line %d: a \";\" must end its line in a file run outside a transaction (one statement per \";\", nothing after it)", i+1)
		}
		current = append(current, strings.TrimRight(line, " \t\r"))
		if strings.HasSuffix(trimmed, ";") {
			statements = append(statements, strings.Join(current, "\n"))
			current = nil
		}
	}
	if len(current) > 0 {
		return nil, errors.New("the last statement does not end with \";\" at the end of a line")
	}
	if len(statements) == 0 {
		return nil, errors.New("no statement")
	}
	return statements, nil
}
