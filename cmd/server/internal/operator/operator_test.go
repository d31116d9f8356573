package operator_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
)

// Add returns a token shown once and a record; only the token's SHA-256 is stored. List shows
// every operator oldest first, revoked ones too; Revoke marks one revoked and frees its name.
func TestAddListRevoke(t *testing.T) {
	h := setup(t)
	annToken, ann := h.add("ann@example.com", operator.RoleAdmin, nil)
	require.True(t, strings.HasPrefix(annToken, "rko_"))
	require.Len(t, annToken, len("rko_")+43)
	require.Equal(t, annToken[:10], ann.Prefix)
	require.Equal(t, operator.RoleAdmin, ann.Role)
	require.Nil(t, ann.Tenants, "every tenant")
	require.Nil(t, ann.RevokedAt)
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_operators WHERE token_sha256 = sha256(convert_to($1, 'UTF8'))`, annToken))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_operators o WHERE strpos(row_to_json(o)::text, $1) > 0`, annToken[4:]),
		"the token itself is stored nowhere")

	_, bob := h.add("bob", operator.RoleViewer, []string{"globex", "acme", "globex"})
	require.Equal(t, []string{"acme", "globex"}, bob.Tenants, "sorted, once each")

	list, err := h.store.List(h.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []string{"ann@example.com", "bob"}, []string{list[0].Name, list[1].Name})
	require.Equal(t, []string{"acme", "globex"}, list[1].Tenants)
	require.Nil(t, list[0].Tenants)

	revoked, err := h.store.Revoke(h.ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, bob.ID, revoked.ID)
	require.NotNil(t, revoked.RevokedAt)
	_, err = h.store.Revoke(h.ctx, "bob")
	require.ErrorIs(t, err, operator.ErrNotFound, "already revoked")
	_, err = h.store.Revoke(h.ctx, "nobody")
	require.ErrorIs(t, err, operator.ErrNotFound)

	_, bob2 := h.add("bob", operator.RoleOperator, nil)
	require.NotEqual(t, bob.ID, bob2.ID, "a revoked operator's name may be given again")
	list, err = h.store.List(h.ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	require.NotNil(t, list[1].RevokedAt)
	require.Nil(t, list[2].RevokedAt)
}

// An operator that is not revoked keeps its name: a second Add of it is ErrExists and stores
// nothing.
func TestAddDuplicateName(t *testing.T) {
	h := setup(t)
	h.add("ann", operator.RoleViewer, nil)
	_, _, err := h.store.Add(h.ctx, "ann", operator.RoleAdmin, []string{"acme"})
	require.ErrorIs(t, err, operator.ErrExists)
	require.Contains(t, err.Error(), "ann")
	require.Equal(t, 1, h.count(`SELECT count(*) FROM reckon_operators`))
}

// A bad name, role or scope is ErrInvalid naming the field, before anything is stored.
func TestAddInvalid(t *testing.T) {
	h := setup(t)
	for _, c := range []struct {
		name    string
		role    operator.Role
		tenants []string
		want    string
	}{
		{"", operator.RoleViewer, nil, "name is empty"},
		{"ann smith", operator.RoleViewer, nil, `name "ann smith"`},
		{"ann\x00", operator.RoleViewer, nil, `name "ann\x00"`},
		{"ann\xff", operator.RoleViewer, nil, `name "ann\xff"`},
		{"annè", operator.RoleViewer, nil, "name"},
		{strings.Repeat("a", 65), operator.RoleViewer, nil, "name: 65 bytes"},
		{strings.Repeat("a", 1<<20), operator.RoleViewer, nil, "name: 1048576 bytes"},
		{"ann", "root", nil, `role "root"`},
		{"ann", "", nil, `role ""`},
		{"ann", "Admin", nil, `role "Admin"`},
		{"ann", operator.RoleViewer, []string{}, "tenants: an empty list"},
		{"ann", operator.RoleViewer, []string{"acme", ""}, `tenants: tenant id ""`},
		{"ann", operator.RoleViewer, []string{"acme:eu"}, `tenants: tenant id "acme:eu"`},
		{"ann", operator.RoleViewer, []string{"ac\x00me"}, `tenants: tenant id "ac\x00me"`},
		{"ann", operator.RoleViewer, []string{"ac\xffme"}, "tenants: tenant id"},
		{"ann", operator.RoleViewer, []string{strings.Repeat("a", 1000)}, "tenants: a tenant id of 1000 bytes"},
		{"ann", operator.RoleViewer, make([]string, 1001), "tenants: 1001"},
	} {
		token, op, err := h.store.Add(h.ctx, c.name, c.role, c.tenants)
		require.ErrorIs(t, err, operator.ErrInvalid, "%.80q", c.name)
		require.Contains(t, err.Error(), c.want)
		require.Less(t, len(err.Error()), 300, "the message does not echo oversized input")
		require.Empty(t, token)
		require.Nil(t, op)
	}
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_operators`))

	_, err := h.store.Revoke(h.ctx, "bad name")
	require.ErrorIs(t, err, operator.ErrInvalid)
}

// Authenticate knows a live operator's token and refuses an unknown, a revoked and a malformed one
// alike.
func TestAuthenticate(t *testing.T) {
	h := setup(t)
	annToken, ann := h.add("ann", operator.RoleOperator, []string{"acme"})
	bobToken, _ := h.add("bob", operator.RoleViewer, nil)

	op, err := h.store.Authenticate(h.ctx, annToken)
	require.NoError(t, err)
	require.Equal(t, ann, op)

	_, err = h.store.Revoke(h.ctx, "bob")
	require.NoError(t, err)
	for name, token := range map[string]string{
		"revoked":      bobToken,
		"unknown":      "rko_" + strings.Repeat("A", 43),
		"API token":    "rk_" + annToken[4:],
		"no prefix":    annToken[4:],
		"empty":        "",
		"truncated":    annToken[:len(annToken)-1],
		"extended":     annToken + "A",
		"NUL":          annToken[:20] + "\x00" + annToken[21:],
		"invalid UTF8": annToken[:20] + "\xff" + annToken[21:],
		"oversize":     annToken + strings.Repeat("A", 1<<20),
		"spaces":       " " + annToken,
	} {
		op, err := h.store.Authenticate(h.ctx, token)
		require.ErrorIs(t, err, operator.ErrUnauthorized, name)
		require.Nil(t, op, name)
	}
}

// The roles: a viewer reads, an operator also acts, an admin also manages operators; a scope of
// nil sees every tenant, a list only its own.
func TestRolesAndScope(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		role          operator.Role
		canAct, admin bool
	}{
		{operator.RoleViewer, false, false},
		{operator.RoleOperator, true, false},
		{operator.RoleAdmin, true, true},
	} {
		role, err := operator.ParseRole(string(c.role))
		require.NoError(t, err)
		op := &operator.Operator{Role: role}
		require.Equal(t, c.canAct, op.CanAct(), c.role)
		require.Equal(t, c.admin, op.IsAdmin(), c.role)
	}
	_, err := operator.ParseRole(strings.Repeat("x", 1000))
	require.ErrorIs(t, err, operator.ErrInvalid)
	require.Contains(t, err.Error(), "role: 1000 bytes")

	all := &operator.Operator{}
	scoped := &operator.Operator{Tenants: []string{"acme", "initech"}}
	require.True(t, all.Sees("acme"))
	require.True(t, all.Sees("globex"))
	require.True(t, scoped.Sees("acme"))
	require.False(t, scoped.Sees("globex"))
	require.False(t, scoped.Sees(""))
}
