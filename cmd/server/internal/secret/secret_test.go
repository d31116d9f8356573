package secret_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/secret"
)

// New makes distinct well-formed secrets with their prefix, shown prefix and SHA-256.
func TestNew(t *testing.T) {
	t.Parallel()
	a, err := secret.New("rk_")
	require.NoError(t, err)
	b, err := secret.New("rk_")
	require.NoError(t, err)
	require.NotEqual(t, a.Value, b.Value)
	require.Len(t, a.Value, len("rk_")+43)
	require.True(t, strings.HasPrefix(a.Value, "rk_"))
	require.Equal(t, a.Value[:9], a.Prefix)
	sum := sha256.Sum256([]byte(a.Value))
	require.Equal(t, sum[:], a.SHA256)
	require.Equal(t, a.SHA256, secret.Hash(a.Value))
	require.True(t, secret.WellFormed(a.Value, "rk_"))

	bare, err := secret.New("")
	require.NoError(t, err)
	require.Len(t, bare.Value, 43)
	require.True(t, secret.WellFormed(bare.Value, ""))
}

// WellFormed refuses another prefix, another length and any character outside base64url.
func TestWellFormed(t *testing.T) {
	t.Parallel()
	good := "rko_" + strings.Repeat("aZ09-_", 7) + "x"
	require.True(t, secret.WellFormed(good, "rko_"))
	for name, value := range map[string]string{
		"other prefix": "rk_" + good[4:],
		"no prefix":    good[4:],
		"short":        good[:len(good)-1],
		"long":         good + "a",
		"NUL":          good[:10] + "\x00" + good[11:],
		"invalid UTF8": good[:10] + "\xff" + good[11:],
		"space":        good[:10] + " " + good[11:],
		"padding":      good[:len(good)-1] + "=",
		"empty":        "",
		"oversize":     "rko_" + strings.Repeat("a", 10000),
	} {
		require.False(t, secret.WellFormed(value, "rko_"), name)
	}
}
