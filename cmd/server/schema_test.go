package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestServeUnmigrated starts the server binary on an empty database: it serves /healthz, /metrics
// and a /readyz that names the pending migrations, answers every API route 503
// schema_not_current, and says so in one log line, with no raw "does not exist" warnings however
// often its background work would run. A `server migrate up` run later opens the API without a
// restart.
func TestServeUnmigrated(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=" + pgtest.NewEmptyDB(t).Config().ConnString()}

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0", "-connector-sync-interval", "100ms", "-idempotency-ttl", "1s")
	base := "http://" + srv.Addr(t)

	code, _ := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	var ready struct {
		Error   string   `json:"error"`
		Pending []string `json:"pending"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ready), body)
	require.Contains(t, ready.Error, "server migrate up")
	require.Contains(t, ready.Pending, "0001_effects")
	require.True(t, strings.HasPrefix(ready.Pending[0], "river ("), "River's migrations come first: %v", ready.Pending)

	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/v1/effects"},
		{http.MethodPost, "/v1/effects"},
		{http.MethodGet, "/v1/effects/00000000-0000-0000-0000-000000000000"},
		{http.MethodPost, "/v1/callbacks/run:id"},
		{http.MethodPost, "/v1/sessions/acme:bot:u:web/messages"},
		{http.MethodGet, "/v1/nowhere"},
	} {
		r, err := http.NewRequest(req.method, base+req.path, strings.NewReader(`{}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(r)
		require.NoError(t, err)
		var apiErr struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&apiErr))
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s", req.method, req.path)
		require.Equal(t, "schema_not_current", apiErr.Error.Code, "%s %s", req.method, req.path)
		require.Contains(t, apiErr.Error.Message, "run `server migrate up`")
		require.Contains(t, apiErr.Error.Message, "0001_effects")
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}

	// Ten rounds of the connector and saga reloads (and more of the purge), all waiting.
	time.Sleep(time.Second)
	logs := srv.Stderr()
	require.NotContains(t, logs, "does not exist")
	require.Equal(t, 1, strings.Count(logs, "the database schema is not current"), logs)

	res := proctest.Run(t, env, server, "migrate", "up")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Eventually(t, func() bool {
		code, _ := get(t, base+"/v1/effects")
		return code == http.StatusUnauthorized // the API itself: no token
	}, 10*time.Second, 50*time.Millisecond)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.True(t, srv.Logged("the database schema is current"))
	time.Sleep(300 * time.Millisecond) // the reloads and the purge run on the new schema
	logs = srv.Stderr()
	require.NotContains(t, logs, `"level":"WARN","msg":"sync`)
	require.NotContains(t, logs, "purge idempotency keys")
}

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
