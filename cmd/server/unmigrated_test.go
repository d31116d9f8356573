package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestCommandsNeedAMigratedDatabase: every command that works on Reckon's tables refuses a database
// that lacks migrations this binary has — empty, or one migration behind — saying which and what
// to run, with exit status 1 and nothing changed; on the migrated database they work.
func TestCommandsNeedAMigratedDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := proctest.Binary(t, "server")
	commands := [][]string{
		{"tenants", "list"}, {"tokens", "list", "-tenant", "acme"}, {"operators", "list"}, {"connectors", "list"}, {"sagas", "list"}, {"sagas", "definitions"},
		{"retention", "status"}, {"retention", "run"}, {"retention", "policy", "list"},
	}

	empty := pgtest.NewEmptyDB(t)
	behind := pgtest.NewDB(t)
	migrator, err := db.NewMigrator(behind, nil)
	require.NoError(t, err)
	_, err = migrator.Down(ctx, &db.DownOpts{Steps: 1})
	require.NoError(t, err)
	migrations, err := db.Migrations()
	require.NoError(t, err)
	last := migrations[len(migrations)-1]

	for _, args := range commands {
		res := proctest.Run(t, []string{"DATABASE_URL=" + empty.Config().ConnString()}, server, args...)
		require.Equal(t, 1, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Contains(t, res.Stderr, "run `server migrate up` first", args)
		require.Contains(t, res.Stderr, "0001_effects", args)

		res = proctest.Run(t, []string{"DATABASE_URL=" + behind.Config().ConnString()}, server, args...)
		require.Equal(t, 1, res.ExitCode, "%v: %s", args, res.Stderr)
		require.Contains(t, res.Stderr, fmt.Sprintf("(pending: %04d_%s)", last.Version, last.Name), args)
	}
	var runs int
	require.NoError(t, behind.QueryRow(ctx, `SELECT count(*) FROM reckon_retention_runs`).Scan(&runs))
	require.Zero(t, runs, "retention did not run")

	_, err = migrator.Up(ctx)
	require.NoError(t, err)
	for _, args := range commands {
		res := proctest.Run(t, []string{"DATABASE_URL=" + behind.Config().ConnString()}, server, args...)
		require.Equal(t, 0, res.ExitCode, "%v: %s", args, res.Stderr)
	}
}
