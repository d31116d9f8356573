package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/pgtest"
	"github.com/reckonhq/reckon/internal/proctest"
)

// TestConnectorsCLI drives `server connectors put|list|delete` through the real binary: flags and
// a JSON file both store a validated definition; an invalid one is refused with exit 2 and stores
// nothing; list prints a table or JSON; delete removes, and a second delete is an error.
func TestConnectorsCLI(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	pool := pgtest.NewDB(t)
	env := []string{"DATABASE_URL=" + pool.Config().ConnString()}
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
	res = proctest.Run(t, env, server, "connectors", "frobnicate")
	require.Equal(t, 2, res.ExitCode)
	require.Contains(t, res.Stderr, "unknown connectors action")
}
