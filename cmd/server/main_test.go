package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// serverOnDB returns the server binary, a pool on a new migrated database, and the environment
// that points the binary at that database.
func serverOnDB(t *testing.T) (server string, pool *pgxpool.Pool, env []string) {
	t.Helper()
	server = proctest.Binary(t, "server")
	pool = pgtest.NewDB(t)
	return server, pool, []string{"DATABASE_URL=" + pool.Config().ConnString()}
}

// cliCommand returns a runner of the server binary's command (its words, "connectors", "limit")
// on env's database: it runs the command with args, requires the exit status wantExit and returns
// the result.
func cliCommand(t *testing.T, env []string, server string, command ...string) func(wantExit int, args ...string) proctest.Result {
	return func(wantExit int, args ...string) proctest.Result {
		t.Helper()
		res := proctest.Run(t, env, server, append(slices.Clone(command), args...)...)
		require.Equal(t, wantExit, res.ExitCode, "%v: %s%s", args, res.Stdout, res.Stderr)
		return res
	}
}

// tenantToken creates tenant with the server binary's CLI and returns a new token of it, made by
// `tokens create -tenant tenant` with flags.
func tenantToken(t *testing.T, env []string, server, tenant string, flags ...string) string {
	t.Helper()
	res := proctest.Run(t, env, server, "tenants", "create", tenant)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, server, append([]string{"tokens", "create", "-tenant", tenant}, flags...)...)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	return strings.TrimSpace(res.Stdout)
}

// tenantTokens creates each of tenants with tenantToken and returns their tokens by tenant.
func tenantTokens(t *testing.T, env []string, server string, tenants ...string) map[string]string {
	t.Helper()
	tokens := make(map[string]string, len(tenants))
	for _, tenant := range tenants {
		tokens[tenant] = tenantToken(t, env, server, tenant)
	}
	return tokens
}

// systemToken creates a system token named "platform" with the CLI and returns it: what changes
// the HTTP connectors and saga definitions that every tenant shares.
func systemToken(t *testing.T, env []string, server string) string {
	t.Helper()
	res := proctest.Run(t, env, server, "tokens", "create", "-system", "-name", "platform")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	return strings.TrimSpace(res.Stdout)
}

// stopBoth sends SIGTERM to the server and the reactor and requires that each exits 0: the
// server within 15s, the reactor (which drains its jobs) within 40s.
func stopBoth(t *testing.T, srv, reactor *proctest.Process) {
	t.Helper()
	srv.Signal(t, syscall.SIGTERM)
	reactor.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
	require.Equal(t, 0, reactor.Wait(t, 40*time.Second), reactor.Stderr())
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestBinariesLifecycle drives the real binaries against an empty database: the server is not
// ready until `server migrate up` has run, both binaries then report healthy and ready and serve
// metrics, and both exit 0 on SIGTERM. `migrate down -all` then leaves the database empty.
func TestBinariesLifecycle(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	reactor := proctest.Binary(t, "reactor")
	url := pgtest.NewEmptyDB(t).Config().ConnString()
	env := []string{"DATABASE_URL=" + url}

	res := proctest.Run(t, env, server, "migrate", "status")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `0001\s+effects\s+pending`, res.Stdout)
	require.Contains(t, res.Stdout, "schema is NOT current")

	res = proctest.Run(t, env, reactor, "-addr", "127.0.0.1:0")
	require.Equal(t, 1, res.ExitCode, "a reactor refuses an unmigrated database")
	require.Contains(t, res.Stderr, "schema is not current")

	srv := proctest.Start(t, env, server, "-addr", "127.0.0.1:0")
	base := "http://" + srv.Addr(t)
	code, _ := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, "not ready before migrating")
	require.Contains(t, body, "migrations pending")

	res = proctest.Run(t, env, server, "migrate", "up")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `applied \d+ River and \d+ Reckon migrations`, res.Stdout)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code, body)

	rct := proctest.Start(t, env, reactor, "-addr", "127.0.0.1:0")
	reactorBase := "http://" + rct.Addr(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(t, reactorBase+path)
		require.Equal(t, http.StatusOK, code, "reactor %s: %s", path, body)
	}
	for _, base := range []string{base, reactorBase} {
		code, body := get(t, base+"/metrics")
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, "go_goroutines")
		require.Contains(t, body, "process_resident_memory_bytes")
		require.Regexp(t, `(?m)^reckon_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1$`, body, "both binaries: health.BuildInfo")
	}

	srv.Signal(t, syscall.SIGTERM)
	rct.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.Wait(t, 15*time.Second), srv.Stderr())
	require.Equal(t, 0, rct.Wait(t, 15*time.Second), rct.Stderr())
	require.True(t, srv.Logged("server stopped"))
	require.True(t, rct.Logged("reactor stopped"))

	res = proctest.Run(t, env, server, "migrate", "down", "-all")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, server, "migrate", "status")
	require.Contains(t, res.Stdout, "river: 0 applied")
	require.Contains(t, res.Stdout, "schema is NOT current")
}

// TestMigrateTwoProcessesAtOnce starts two `server migrate up` processes on one empty database at
// the same moment: both succeed and between them every migration is applied once.
func TestMigrateTwoProcessesAtOnce(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	pool := pgtest.NewEmptyDB(t)
	env := []string{"DATABASE_URL=" + pool.Config().ConnString()}

	results := make(chan proctest.Result, 2)
	for range 2 {
		go func() { results <- proctest.Run(t, env, server, "migrate", "up") }()
	}
	applied := map[string]int{}
	re := regexp.MustCompile(`applied (\d+) River and (\d+) Reckon migrations`)
	for range 2 {
		res := <-results
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		match := re.FindStringSubmatch(res.Stdout)
		require.NotNil(t, match, res.Stdout)
		river, _ := strconv.Atoi(match[1])
		reckon, _ := strconv.Atoi(match[2])
		applied["river"] += river
		applied["reckon"] += reckon
	}
	var riverVersions, reckonVersions int
	ctx := context.Background()
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_migration`).Scan(&riverVersions))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_schema_migrations`).Scan(&reckonVersions))
	require.Equal(t, map[string]int{"river": riverVersions, "reckon": reckonVersions}, applied)
	require.Positive(t, reckonVersions)
}

// TestBinariesInSchema: `server migrate up -schema NAME` puts Reckon's and River's tables in that
// schema (creating it), and the binaries given the same schema, by flag or RECKON_SCHEMA, work in
// it; the default schema, public, stays empty and unmigrated.
func TestBinariesInSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := proctest.Binary(t, "server")
	reactor := proctest.Binary(t, "reactor")
	pool := pgtest.NewEmptyDB(t)
	env := []string{"DATABASE_URL=" + pool.Config().ConnString()}

	res := proctest.Run(t, env, server, "migrate", "up", "-schema", "cell1")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `applied [1-9]\d* River and [1-9]\d* Reckon migrations`, res.Stdout)
	res = proctest.Run(t, env, server, "migrate", "status", "-schema", "cell1")
	require.Contains(t, res.Stdout, "schema is current")
	res = proctest.Run(t, env, server, "migrate", "status")
	require.Contains(t, res.Stdout, "schema is NOT current", "public is not migrated")
	var inPublic int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&inPublic))
	require.Zero(t, inPublic)

	cellEnv := append(slices.Clone(env), "RECKON_SCHEMA=cell1")
	res = proctest.Run(t, cellEnv, server, "tenants", "create", "acme")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var tenants int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM cell1.reckon_tenants WHERE id = 'acme'`).Scan(&tenants))
	require.Equal(t, 1, tenants)
	res = proctest.Run(t, env, server, "tenants", "list")
	require.Equal(t, 1, res.ExitCode, "public is not migrated")
	require.Contains(t, res.Stderr, "run `server migrate up` first")

	rct := proctest.Start(t, env, reactor, "-addr", "127.0.0.1:0", "-schema", "cell1")
	srv := proctest.Start(t, cellEnv, server, "-addr", "127.0.0.1:0")
	for _, base := range []string{"http://" + rct.Addr(t), "http://" + srv.Addr(t)} {
		code, body := get(t, base+"/readyz")
		require.Equal(t, http.StatusOK, code, "%s: %s", base, body)
	}
	var reactors int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM cell1.reckon_reactors WHERE dead_at IS NULL`).Scan(&reactors))
	require.Equal(t, 1, reactors)
	stopBoth(t, srv, rct)
}

func TestMigrateCreatesDatabase(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	existing := pgtest.NewEmptyDB(t)
	name := existing.Config().ConnConfig.Database + "_created"
	url := postgres.WithDatabase(existing.Config().ConnString(), name)
	t.Cleanup(func() {
		_, err := existing.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		require.NoError(t, err)
	})

	res := proctest.Run(t, []string{"DATABASE_URL=" + url}, server, "migrate", "up")
	require.Equal(t, 1, res.ExitCode, "without -create-db a missing database is an error")
	require.Contains(t, res.Stderr, name)

	res = proctest.Run(t, []string{"DATABASE_URL=" + url}, server, "migrate", "up", "-create-db")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, "created database")
	res = proctest.Run(t, []string{"DATABASE_URL=" + url}, server, "migrate", "status")
	require.Contains(t, res.Stdout, "schema is current")
}

// TestBadCommandLines: every mistake exits 2 with a message and changes nothing.
func TestBadCommandLines(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	reactor := proctest.Binary(t, "reactor")
	url := pgtest.NewEmptyDB(t).Config().ConnString()
	env := []string{"DATABASE_URL=" + url}

	for _, tc := range []struct {
		bin  string
		args []string
		want string
	}{
		{server, []string{"migrate"}, "server migrate status"},
		{server, []string{"migrate", "sideways"}, `unknown migrate direction "sideways"`},
		{server, []string{"migrate", "down", "-steps", "0"}, "-steps must be at least 1"},
		{server, []string{"migrate", "up", "-bogus"}, "flag provided but not defined: -bogus"},
		{server, []string{"migrate", "status", "extra"}, `unexpected argument "extra"`},
		{server, []string{"-log-format", "xml"}, `log format "xml"`},
		{server, []string{"serve-please"}, `unknown command "serve-please"`},
		{server, []string{"-max-body-bytes", "0"}, "must be positive"},
		{server, []string{"-max-body-bytes", "2000", "-max-body-bytes-in-flight", "1000"}, "must be at least -max-body-bytes"},
		{server, []string{"tenants"}, "server tenants create ID"},
		{server, []string{"tenants", "create"}, "needs an ID"},
		{server, []string{"tenants", "list", "extra"}, `unexpected argument "extra"`},
		{server, []string{"tokens", "frob"}, `unknown tokens action "frob"`},
		{server, []string{"tokens", "create", "-name", "x"}, "-tenant T or -system is required"},
		{server, []string{"tokens", "revoke", "nope"}, `token id "nope" is not a UUID`},
		{reactor, []string{"-log-format", "xml"}, `log format "xml"`},
		{reactor, []string{"-nope"}, "flag provided but not defined: -nope"},
		{reactor, []string{"-db-conns", "2"}, "-db-conns at least 4"},
		{server, []string{"migrate", "up", "-schema", "Cell1"}, `-schema (or RECKON_SCHEMA): schema "Cell1": want lowercase letters`},
		{server, []string{"migrate", "up", "-schema", `x"; DROP SCHEMA public; --`}, "want lowercase letters"},
		{server, []string{"tenants", "list", "-schema", "pg_cell"}, "a name Postgres reserves"},
		{server, []string{"-schema", ""}, "schema: empty name"},
		{reactor, []string{"-schema", strings.Repeat("c", 47)}, "longer than 46 characters"},
		{server, []string{"migrate", "up", "-citus"}, "-citus needs a schema of its own for the cell"},
		{server, []string{"migrate", "status", "-citus"}, "flag provided but not defined: -citus"},
	} {
		res := proctest.Run(t, env, tc.bin, tc.args...)
		require.Equal(t, 2, res.ExitCode, "%v: %s", tc.args, res.Stderr)
		require.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}
	res := proctest.Run(t, env, server, "migrate", "status")
	require.True(t, strings.Contains(res.Stdout, "river: 0 applied"), "bad command lines changed the database:\n%s", res.Stdout)

	res = proctest.Run(t, []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=2"}, server, "migrate", "status")
	require.Equal(t, 1, res.ExitCode)
	require.Contains(t, res.Stderr, "database none on 127.0.0.1")
}
