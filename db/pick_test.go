package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// reckon_pick (migration 0041) is CASE WHEN choose_first THEN first ELSE second END: NULL chooses
// the second.
func TestPick(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	var first, second, unknown string
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT reckon_pick(true, '2026-01-01Z', '2027-01-01Z')::date::text,
		       reckon_pick(false, '2026-01-01Z', '2027-01-01Z')::date::text,
		       reckon_pick(NULL, '2026-01-01Z', '2027-01-01Z')::date::text`).Scan(&first, &second, &unknown))
	require.Equal(t, []string{"2026-01-01", "2027-01-01", "2027-01-01"}, []string{first, second, unknown})
}
