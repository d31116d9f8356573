package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestConnectorsCLI drives `server connectors put|list|delete` through the real binary: flags and
// a JSON file both store a validated definition; an invalid one is refused with exit 2 and stores
// nothing; list prints a table or JSON; delete removes, and a second delete is an error.
func TestConnectorsCLI(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	ctx := context.Background()

	res := proctest.Run(t, env, server, "connectors", "list")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "no HTTP connectors")

	res = proctest.Run(t, env, server, "connectors", "put", "-name", "bank.wire", "-tags", "write,external",
		"-dispatch-url", "http://127.0.0.1:7000/wires", "-status-url", "http://127.0.0.1:7000/wires/status",
		"-timeout", "2s", "-max-attempts", "3")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "created connector bank.wire (policy irreversible)")
	def, err := httpconn.Get(ctx, pool, "bank.wire")
	require.NoError(t, err)
	require.Equal(t, 3, def.MaxAttempts)
	require.Equal(t, "http://127.0.0.1:7000/wires/status", def.StatusURL)

	// Not retry safe and no way to resolve UNKNOWN: refused, nothing stored.
	res = proctest.Run(t, env, server, "connectors", "put", "-name", "email.send", "-tags", "write",
		"-dispatch-url", "http://127.0.0.1:7000/email")
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "not retry safe")
	_, err = httpconn.Get(ctx, pool, "email.send")
	require.ErrorIs(t, err, httpconn.ErrNotFound)

	file := filepath.Join(t.TempDir(), "refund.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"name":"bank.refund","tags":["write","idempotent"],
		"dispatch_url":"http://127.0.0.1:7000/refunds","timeout_ms":1500}`), 0o600))
	res = proctest.Run(t, env, server, "connectors", "put", "-f", file, "-max-attempts", "7")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "created connector bank.refund (policy idempotent)")
	def, err = httpconn.Get(ctx, pool, "bank.refund")
	require.NoError(t, err)
	require.Equal(t, 7, def.MaxAttempts, "a flag overrides the file")
	require.Equal(t, int64(1500), def.Timeout.Milliseconds())

	requireAsyncConnectorCLI(t, pool, env, server)

	require.NoError(t, os.WriteFile(file, []byte(`{"name":"x","dispatch_ur":"http://127.0.0.1/"}`), 0o600))
	res = proctest.Run(t, env, server, "connectors", "put", "-f", file)
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "dispatch_ur")

	res = proctest.Run(t, env, server, "connectors", "list")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Regexp(t, `bank.refund\s+idempotent\s+write,idempotent\s+http://127.0.0.1:7000/refunds`, res.Stdout)
	require.Regexp(t, `bank.wire\s+irreversible\s+write,external`, res.Stdout)
	res = proctest.Run(t, env, server, "connectors", "list", "-json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var listed []httpconn.Definition
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &listed))
	require.Len(t, listed, 2)
	require.Equal(t, "bank.refund", listed[0].Name)

	res = proctest.Run(t, env, server, "connectors", "delete", "-name", "bank.refund")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = proctest.Run(t, env, server, "connectors", "delete", "-name", "bank.refund")
	require.Equal(t, 1, res.ExitCode)
	require.Contains(t, res.Stderr, "connector not found")
	res = proctest.Run(t, env, server, "connectors", "delete")
	require.Equal(t, 2, res.ExitCode)

	// Every change made with the CLI is in the audit trail, by "cli:{OS user}"; a refused one
	// (the second delete) is not.
	require.Equal(t, testkit.Count(t, pool, `SELECT count(*) FROM reckon_definition_changes WHERE kind = 'connector'`),
		testkit.Count(t, pool, `SELECT count(*) FROM reckon_definition_changes WHERE kind = 'connector' AND actor LIKE 'cli%' AND token_id IS NULL`))
	require.Equal(t, 1, testkit.Count(t, pool,
		`SELECT count(*) FROM reckon_definition_changes WHERE name = 'bank.refund' AND action = 'delete' AND definition IS NULL`))
	require.Equal(t, 1, testkit.Count(t, pool,
		`SELECT count(*) FROM reckon_definition_changes WHERE name = 'bank.wire' AND action = 'create' AND definition->>'dispatch_url' <> ''`))
	res = proctest.Run(t, env, server, "connectors", "frobnicate")
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "unknown connectors action")
}

// requireAsyncConnectorCLI: `connectors put` stores a connector's async settings from flags and
// from the file (flags win); out-of-range ones exit 2 and change nothing.
func requireAsyncConnectorCLI(t *testing.T, pool *pgxpool.Pool, env []string, server string) {
	t.Helper()
	ctx := context.Background()
	res := proctest.Run(t, env, server, "connectors", "put", "-name", "jobs.render", "-tags", "write,idempotent",
		"-dispatch-url", "http://127.0.0.1:7000/render", "-async-timeout", "90s", "-hard-timeout",
		"-cancel-url", "http://127.0.0.1:7000/render/cancel")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	def, err := httpconn.Get(ctx, pool, "jobs.render")
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, def.AsyncTimeout)
	require.True(t, def.HardTimeout)
	require.Equal(t, "http://127.0.0.1:7000/render/cancel", def.CancelURL)
	asyncFile := filepath.Join(t.TempDir(), "render.json")
	require.NoError(t, os.WriteFile(asyncFile, []byte(`{"name":"jobs.render","tags":["write","idempotent"],
		"dispatch_url":"http://127.0.0.1:7000/render","async_timeout_ms":120000,"cancel_url":"http://127.0.0.1:7000/c"}`), 0o600))
	res = proctest.Run(t, env, server, "connectors", "put", "-f", asyncFile, "-async-timeout", "3m")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	def, err = httpconn.Get(ctx, pool, "jobs.render")
	require.NoError(t, err)
	require.Equal(t, 3*time.Minute, def.AsyncTimeout, "a flag overrides the file")
	require.False(t, def.HardTimeout, "replaced: soft, as the file says")
	require.Equal(t, "http://127.0.0.1:7000/c", def.CancelURL)
	for _, args := range [][]string{{"-async-timeout", "169h"}, {"-async-timeout", "-1s"}, {"-cancel-url", "render/cancel"}} {
		res = proctest.Run(t, env, server, append([]string{"connectors", "put", "-f", asyncFile}, args...)...)
		require.Equal(t, 2, res.ExitCode, "%v", args)
		require.Regexp(t, `async_timeout_ms|cancel_url`, res.Stderr)
	}
	require.NoError(t, os.WriteFile(asyncFile, []byte(`{"name":"jobs.render","dispatch_url":"http://127.0.0.1:7000/render","async_timeout_ms":0}`), 0o600))
	res = proctest.Run(t, env, server, "connectors", "put", "-f", asyncFile)
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "async_timeout_ms 0 out of range")
	def, err = httpconn.Get(ctx, pool, "jobs.render")
	require.NoError(t, err)
	require.Equal(t, 3*time.Minute, def.AsyncTimeout, "a refused definition changes nothing")
	require.NoError(t, httpconn.Delete(ctx, pool, "jobs.render"))
}
