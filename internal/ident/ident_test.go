package ident

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTenantID(t *testing.T) {
	for _, id := range []string{"a", "acme", "Acme-1.eu_west", strings.Repeat("x", 63)} {
		require.True(t, IsTenantID(id), id)
	}
	for _, id := range []string{"", "-acme", ".acme", "ac me", "acme:1", "acmé", strings.Repeat("x", 64), "a\x00"} {
		require.False(t, IsTenantID(id), id)
	}
	require.NoError(t, ValidateTenantID("acme"))
	require.EqualError(t, ValidateTenantID("ac me"), `tenant id "ac me": want `+TenantIDRule)
}

func TestName(t *testing.T) {
	for _, name := range []string{"a", "bank.wire", "payments:refund-v2", "A_1"} {
		require.True(t, IsName(name), name)
	}
	for _, name := range []string{"", ":x", "-x", "bank wire", "bank/wire", "wïre", "x\n"} {
		require.False(t, IsName(name), name)
	}
}
