package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
	"github.com/reckonhq/reckon/retention"
)

// TestRetentionCLI drives `server retention` through the real binary: status shows the settings,
// the tables, the partitions and what the next run removes; run -dry-run changes nothing; run
// prunes and records the run under cli:{user}; a run while another holds the lock says so and
// exits 1; policies are set, listed and unset; partitions changes reckon_audit_settings.
func TestRetentionCLI(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`INSERT INTO reckon_effects (id, tenant_id, connector, idempotency_key, policy, transition_actor, transition_reason)
	      SELECT gen_random_uuid(), 'acme', 'bank.wire', 'old-' || g, 'idempotent', 'test', 'seeded' FROM generate_series(1, 5) g`)
	exec(`UPDATE reckon_effects SET state = 'CONFIRMED', transition_actor = 'test', transition_reason = 'settled'`)
	exec(`UPDATE reckon_effects SET updated_at = now() - interval '40 days'`)
	count := func() int { return testkit.Count(t, pool, `SELECT count(*) FROM reckon_effects`) }

	res := proctest.Run(t, env, server, "retention", "status")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	for _, want := range []string{"effect retention  30 days (720h0m0s)", "audit retention   400 days (9600h0m0s)", "dedup window      none",
		"partitions        per month, made 62 days (1488h0m0s) ahead", "reckon_effects", "reckon_effect_transitions_default",
		"next run (a dry run now)", "would remove 5 rows", "reckon_effects  5", "last runs", "none"} {
		require.Contains(t, res.Stdout, want)
	}

	res = proctest.Run(t, env, server, "retention", "status", "-json", "-effect-retention", "1000h")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var status retention.Status
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &status))
	require.Equal(t, 1000*time.Hour, status.EffectRetention)
	require.Zero(t, status.Next.Removed[retention.TableEffects], "40 days is within 1000h")

	res = proctest.Run(t, env, server, "retention", "run", "-dry-run")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "would remove 5 rows")
	require.Equal(t, 5, count())

	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyRetention)
	require.NoError(t, err)
	res = proctest.Run(t, env, server, "retention", "run")
	require.Equal(t, 1, res.ExitCode)
	require.Contains(t, res.Stderr, "another retention run is in progress")
	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, db.AdvisoryLockNamespace, db.LockKeyRetention)
	require.NoError(t, err)
	holder.Release()

	res = proctest.Run(t, env, server, "retention", "run", "-json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var report retention.Report
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &report))
	require.EqualValues(t, 5, report.Removed[retention.TableEffects])
	require.Zero(t, count())
	require.Equal(t, 1, testkit.Count(t, pool, `SELECT count(*) FROM reckon_retention_runs WHERE actor LIKE 'cli:%' AND NOT dry_run AND finished_at IS NOT NULL`))
	res = proctest.Run(t, env, server, "retention", "status")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "5 rows, 0 partitions")

	res = proctest.Run(t, env, server, "retention", "policy", "set", "-tenant", "acme", "-effect-retention", "48h")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "tenant acme: settled work kept 48h0m0s")
	res = proctest.Run(t, env, server, "retention", "policy", "list")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "acme    48h0m0s")
	res = proctest.Run(t, env, server, "retention", "policy", "unset", "-tenant", "acme")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "policy removed")
	res = proctest.Run(t, env, server, "retention", "policy", "unset", "-tenant", "acme")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "had no policy")
	res = proctest.Run(t, env, server, "retention", "policy", "list", "-json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.JSONEq(t, `[]`, res.Stdout)

	res = proctest.Run(t, env, server, "retention", "partitions", "-period", "day", "-premake", "240h")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "period month → day, premake 1488h0m0s → 240h0m0s")
	require.Equal(t, 1, testkit.Count(t, pool, `SELECT count(*) FROM reckon_audit_settings WHERE period = 'day' AND premake = interval '240 hours'`))
}

// TestRetentionCLIInput: bad input is refused with exit status 2, naming the flag, before the
// database is touched.
func TestRetentionCLIInput(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"retention"}, "want one of"},
		{nil, []string{"retention", "purge"}, `unknown retention action "purge"`},
		{nil, []string{"retention", "status", "-effect-retention", "59m"}, "-effect-retention must be at least 1h"},
		{nil, []string{"retention", "run", "-audit-retention", "1h"}, "-audit-retention must be 0 (keep forever) or at least -effect-retention"},
		{nil, []string{"retention", "run", "-retention-batch", "0"}, "-retention-batch must be between 1 and 10000"},
		{nil, []string{"retention", "run", "-retention-interval", "1h"}, "flag provided but not defined: -retention-interval"},
		{[]string{"RECKON_DEDUP_WINDOW=soon"}, []string{"retention", "run"}, `RECKON_DEDUP_WINDOW="soon": not a duration`},
		{nil, []string{"retention", "policy", "set", "-effect-retention", "2h"}, "-tenant is required"},
		{nil, []string{"retention", "policy", "set", "-tenant", "acme:eu", "-effect-retention", "2h"}, "-tenant: retention: invalid input: tenant \"acme:eu\""},
		{nil, []string{"retention", "policy", "set", "-tenant", "acme"}, "-effect-retention is required, at least 1h0m0s"},
		{nil, []string{"retention", "policy", "set", "-tenant", "acme", "-effect-retention", "30m"}, "-effect-retention is required, at least 1h0m0s"},
		{nil, []string{"retention", "policy", "unset", "-tenant", "-x"}, "-tenant: "},
		{nil, []string{"retention", "policy", "drop"}, `unknown retention policy action "drop"`},
		{nil, []string{"retention", "partitions"}, "give -period day|month, -premake D, or both"},
		{nil, []string{"retention", "partitions", "-period", "week"}, `-period must be day or month, got "week"`},
		{nil, []string{"retention", "partitions", "-premake", "1h"}, "-premake must be between 24h and 9600h"},
	} {
		res := proctest.Run(t, append(env, c.env...), server, c.args...)
		require.Equal(t, 2, res.ExitCode, "%v %v: %s", c.env, c.args, res.Stderr)
		require.Contains(t, res.Stderr, c.want, "%v", c.args)
	}
}

// TestRetentionHelp: `server retention -h` lists the actions, each action's -h its flags, without
// touching the database.
func TestRetentionHelp(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}
	res := proctest.Run(t, env, server, "-h")
	require.Contains(t, res.Stdout, "\n  retention ")
	res = proctest.Run(t, env, server, "retention", "-h")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	for _, action := range []string{"status", "run", "policy set", "policy unset", "policy list", "partitions"} {
		require.Contains(t, res.Stdout, "server retention "+action)
	}
	for args, flags := range map[string][]string{
		"status":       {"-json", "-effect-retention", "-audit-retention", "-dedup-window", "-idempotency-ttl", "-retention-batch"},
		"run":          {"-dry-run", "-effect-retention"},
		"policy set":   {"-tenant", "-effect-retention"},
		"policy unset": {"-tenant"},
		"partitions":   {"-period", "-premake"},
		"policy list":  {"-json"},
	} {
		res := proctest.Run(t, env, server, append(append([]string{"retention"}, strings.Fields(args)...), "-h")...)
		require.Equal(t, 0, res.ExitCode, "%s: %s", args, res.Stderr)
		require.Contains(t, res.Stdout, "usage: server retention "+args)
		for _, flag := range flags {
			require.Contains(t, res.Stdout, flag, "%s", args)
		}
	}
}
