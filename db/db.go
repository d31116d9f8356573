// Package db holds Reckon's schema: the SQL migrations in db/migrations, embedded into every
// binary, and the Migrator that applies them together with River's own migrations.
//
// Several processes may migrate the same database at once (deploys often start several): the
// Migrator serializes them with a Postgres advisory lock, so each migration is applied exactly
// once, in its own transaction together with the row that records it.
package db

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// AdvisoryLockNamespace is the first key of every two-key advisory lock Reckon takes
// (pg_advisory_lock(AdvisoryLockNamespace, key)); it keeps Reckon's locks apart from an
// application's own. The second key names the lock: see LockKeyMigrate.
const AdvisoryLockNamespace int32 = 0x52434b4e // "RCKN"

// LockKeyMigrate is the second advisory lock key, held while migrating.
const LockKeyMigrate int32 = 1

// Migration is one numbered schema change of Reckon's own, with its up and down SQL.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

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
	byVersion := map[int]*Migration{}
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
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: match[2]}
			byVersion[version] = m
		}
		if m.Name != match[2] {
			return nil, fmt.Errorf("migration %04d has two names: %q and %q", version, m.Name, match[2])
		}
		if match[3] == "up" {
			m.Up = string(sql)
		} else {
			m.Down = string(sql)
		}
	}
	migrations := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		migrations = append(migrations, *m)
	}
	sort.Slice(migrations, func(i, j int) bool { return migrations[i].Version < migrations[j].Version })
	for _, m := range migrations {
		if m.Version < 1 {
			return nil, fmt.Errorf("migration versions start at 0001, found %04d_%s", m.Version, m.Name)
		}
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %04d_%s needs both an .up.sql and a .down.sql file", m.Version, m.Name)
		}
	}
	return migrations, nil
}
