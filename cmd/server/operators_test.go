package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// TestOperatorsCLI drives `server operators` through the real binary: add prints the token alone
// on stdout (it signs in), the rest on stderr; a taken name exits 1 and adds nothing; list shows
// every operator with its role and scope, as a table or JSON; revoke refuses the token and ends
// the operator's sessions, and a second revoke exits 1.
func TestOperatorsCLI(t *testing.T) {
	t.Parallel()
	server, pool, env := serverOnDB(t)
	ctx := context.Background()
	store := operator.NewStore(pool)

	res := proctest.Run(t, env, server, "operators", "add", "-name", "ann@example.com", "-role", "admin")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	annToken := strings.TrimSpace(res.Stdout)
	require.True(t, strings.HasPrefix(annToken, operator.TokenPrefix), res.Stdout)
	require.Contains(t, res.Stderr, "added operator ann@example.com (admin of every tenant)")
	require.Contains(t, res.Stderr, "shown only now")
	ann, err := store.Authenticate(ctx, annToken)
	require.NoError(t, err)
	require.Equal(t, operator.RoleAdmin, ann.Role)
	require.Nil(t, ann.Tenants)

	res = proctest.Run(t, env, server, "operators", "add", "-role", "viewer", "-name", "bob", "-tenants", "globex, acme")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, "added operator bob (viewer of tenants acme, globex)")
	bob, err := store.Authenticate(ctx, strings.TrimSpace(res.Stdout))
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "globex"}, bob.Tenants)

	res = proctest.Run(t, env, server, "operators", "add", "-name", "bob", "-role", "admin")
	require.Equal(t, 1, res.ExitCode, res.Stderr)
	require.Empty(t, res.Stdout)
	require.Contains(t, res.Stderr, "an operator with this name exists: bob")
	require.Equal(t, 2, testkit.Count(t, pool, `SELECT count(*) FROM reckon_operators`))

	res = proctest.Run(t, env, server, "operators", "list")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	require.Len(t, lines, 3, res.Stdout)
	require.Equal(t, []string{"NAME", "ROLE", "TENANTS", "PREFIX", "CREATED", "STATUS"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"ann@example.com", "admin", "all", ann.Prefix + "…"}, strings.Fields(lines[1])[:4])
	require.Equal(t, "live", strings.Fields(lines[1])[5])
	require.Equal(t, []string{"bob", "viewer", "acme,globex", bob.Prefix + "…"}, strings.Fields(lines[2])[:4])
	require.NotContains(t, res.Stdout, annToken)

	annSession, err := store.SignIn(ctx, annToken, time.Hour)
	require.NoError(t, err)
	res = proctest.Run(t, env, server, "operators", "revoke", "ann@example.com")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stdout, "revoked operator ann@example.com (admin of every tenant)")
	_, err = store.Session(ctx, annSession.ID)
	require.ErrorIs(t, err, operator.ErrUnauthorized, "the revocation ended the session")
	_, err = store.Authenticate(ctx, annToken)
	require.ErrorIs(t, err, operator.ErrUnauthorized)
	res = proctest.Run(t, env, server, "operators", "revoke", "ann@example.com")
	require.Equal(t, 1, res.ExitCode, res.Stderr)
	require.Contains(t, res.Stderr, `no operator named "ann@example.com" that is not revoked`)

	res = proctest.Run(t, env, server, "operators", "list", "-json")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	var listed []*operator.Operator
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &listed), res.Stdout)
	require.Len(t, listed, 2)
	require.Equal(t, "ann@example.com", listed[0].Name)
	require.NotNil(t, listed[0].RevokedAt)
	require.Nil(t, listed[0].Tenants)
	require.Equal(t, bob.ID, listed[1].ID)
	require.Equal(t, []string{"acme", "globex"}, listed[1].Tenants)
	require.Nil(t, listed[1].RevokedAt)
}

// TestOperatorsCLIInput: bad input is refused with exit status 2, naming the flag, before the
// database is touched (it is unreachable here).
func TestOperatorsCLIInput(t *testing.T) {
	t.Parallel()
	server := proctest.Binary(t, "server")
	env := []string{"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"operators"}, "want one of"},
		{[]string{"operators", "delete"}, `unknown operators action "delete"`},
		{[]string{"operators", "add", "-role", "viewer"}, "-name is required"},
		{[]string{"operators", "add", "-name", "ann smith", "-role", "viewer"}, `-name: operator: invalid input: name "ann smith"`},
		{[]string{"operators", "add", "-name", "ann\xff", "-role", "viewer"}, `-name: operator: invalid input: name "ann\xff"`},
		{[]string{"operators", "add", "-name", strings.Repeat("a", 65), "-role", "viewer"}, "-name: operator: invalid input: name: 65 bytes"},
		{[]string{"operators", "add", "-name", "ann"}, "-role is required"},
		{[]string{"operators", "add", "-name", "ann", "-role", "root"}, `-role: operator: invalid input: role "root"`},
		{[]string{"operators", "add", "-name", "ann", "-role", "viewer", "-tenants", ""}, "-tenants is empty"},
		{[]string{"operators", "add", "-name", "ann", "-role", "viewer", "-tenants", "acme,,globex"}, `-tenants: operator: invalid input: tenants: tenant id ""`},
		{[]string{"operators", "add", "-name", "ann", "-role", "viewer", "-tenants", "acme:eu"}, `-tenants: operator: invalid input: tenants: tenant id "acme:eu"`},
		{[]string{"operators", "add", "-name", "ann", "-role", "viewer", "extra"}, `unexpected argument "extra"`},
		{[]string{"operators", "list", "-tenants", "acme"}, "flag provided but not defined: -tenants"},
		{[]string{"operators", "revoke"}, "server operators revoke needs the operator's NAME"},
		{[]string{"operators", "revoke", "ann smith"}, `NAME: operator: invalid input: name "ann smith"`},
		{[]string{"operators", "revoke", "ann", "bob"}, `unexpected argument "bob"`},
	} {
		res := proctest.Run(t, env, server, c.args...)
		require.Equal(t, 2, res.ExitCode, "%q: %s", c.args, res.Stderr)
		require.Empty(t, res.Stdout, "%q", c.args)
		require.Contains(t, res.Stderr, c.want, "%q", c.args)
	}
}
