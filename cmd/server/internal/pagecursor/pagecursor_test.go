package pagecursor

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	c := Cursor{At: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), ID: "acme/run 1"}
	s := c.String()
	require.NotContains(t, s, "/")
	back, err := Parse(s)
	require.NoError(t, err)
	require.True(t, c.At.Equal(back.At))
	require.Equal(t, c.ID, back.ID)
	// A forged cursor past Postgres's years (1 to 9999) is refused, not read as some other page.
	forged := func(micros string) string { return base64.RawURLEncoding.EncodeToString([]byte(micros + "/x")) }
	for _, bad := range []string{
		"", "!!!", strings.Repeat("A", 600), Cursor{At: time.Now(), ID: "\x00"}.String(),
		Cursor{At: time.Now(), ID: "\xff"}.String(), base64.RawURLEncoding.EncodeToString([]byte("123")),
		forged("9223372036854775807"), forged("-9223372036854775808"), forged("253402300800000000"),
	} {
		_, err := Parse(bad)
		require.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
}

func TestParseUUID(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	at := time.Date(2026, 3, 1, 12, 0, 0, 5000, time.UTC)
	gotAt, gotID, err := ParseUUID(Cursor{At: at, ID: id.String()}.String())
	require.NoError(t, err)
	require.True(t, at.Equal(gotAt))
	require.Equal(t, id, gotID)
	_, _, err = ParseUUID(Cursor{At: at, ID: "acme"}.String())
	require.ErrorIs(t, err, ErrInvalid)
}
