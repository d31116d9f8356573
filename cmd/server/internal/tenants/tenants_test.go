package tenants_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestTenantsAndTokens walks a tenant's life: created once, given tokens that authenticate until
// they are revoked or the tenant is disabled; a system token has no tenant.
func TestTenantsAndTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)

	_, err := tenants.Create(ctx, pool, "ac me", "")
	require.EqualError(t, err, `tenant id "ac me": want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit`)
	acme, err := tenants.Create(ctx, pool, "acme", "Acme")
	require.NoError(t, err)
	require.Equal(t, "Acme", acme.Name)
	_, err = tenants.Create(ctx, pool, "acme", "")
	require.ErrorIs(t, err, tenants.ErrExists)
	_, _, err = tenants.CreateToken(ctx, pool, "initech", nil)
	require.ErrorIs(t, err, tenants.ErrNotFound)

	secret, token, err := tenants.CreateToken(ctx, pool, "acme", &tenants.TokenOpts{Name: "ops", Admin: true})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, tenants.TokenPrefix), secret)
	require.True(t, strings.HasPrefix(secret, token.Prefix), "%s starts with its prefix %s", secret, token.Prefix)
	require.Equal(t, tenants.Token{ID: token.ID, TenantID: "acme", Name: "ops", Prefix: token.Prefix, Admin: true, CreatedAt: token.CreatedAt}, *token)
	seen, err := tenants.Authenticate(ctx, pool, secret)
	require.NoError(t, err)
	require.Equal(t, token.ID, seen.ID)
	_, err = tenants.Authenticate(ctx, pool, "hunter2")
	require.ErrorIs(t, err, tenants.ErrInvalidToken)

	systemSecret, system, err := tenants.CreateSystemToken(ctx, pool, "platform")
	require.NoError(t, err)
	require.True(t, system.System)
	require.Empty(t, system.TenantID)
	systemTokens, err := tenants.ListSystemTokens(ctx, pool)
	require.NoError(t, err)
	require.Len(t, systemTokens, 1)

	_, err = tenants.SetDisabled(ctx, pool, "acme", true)
	require.NoError(t, err)
	_, err = tenants.Authenticate(ctx, pool, secret)
	require.ErrorIs(t, err, tenants.ErrInvalidToken, "a disabled tenant's token")
	_, err = tenants.Authenticate(ctx, pool, systemSecret)
	require.NoError(t, err)
	list, err := tenants.List(ctx, pool)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].DisabledAt)
	_, err = tenants.SetDisabled(ctx, pool, "initech", true)
	require.ErrorIs(t, err, tenants.ErrNotFound)

	_, err = tenants.SetDisabled(ctx, pool, "acme", false)
	require.NoError(t, err)
	revoked, err := tenants.RevokeToken(ctx, pool, token.ID)
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = tenants.Authenticate(ctx, pool, secret)
	require.ErrorIs(t, err, tenants.ErrInvalidToken, "a revoked token")
	listed, err := tenants.ListTokens(ctx, pool, "acme")
	require.NoError(t, err)
	require.Len(t, listed, 1)
	_, err = tenants.RevokeToken(ctx, pool, system.ID)
	require.NoError(t, err)
	_, err = tenants.RevokeToken(ctx, pool, uuid.New())
	require.ErrorIs(t, err, tenants.ErrTokenNotFound)
}
