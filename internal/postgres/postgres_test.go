package postgres_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/postgres"
)

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/postgres", "postgres://postgres@127.0.0.1:5432/x_1"},
		{"postgresql://u:p@h:1/db?sslmode=disable", "postgresql://u:p@h:1/x_1?sslmode=disable"},
		{"postgres://u@h", "postgres://u@h/x_1"},
		{"host=h user=u dbname=db", "host=h user=u dbname=db dbname='x_1'"},
	} {
		got := postgres.WithDatabase(tc.in, "x_1")
		require.Equal(t, tc.want, got)
		config, err := pgx.ParseConfig(got)
		require.NoError(t, err)
		require.Equal(t, "x_1", config.Database)
	}
}

func TestNoRows(t *testing.T) {
	t.Parallel()
	require.True(t, postgres.NoRows(pgx.ErrNoRows))
	require.True(t, postgres.NoRows(fmt.Errorf("read the effect: %w", pgx.ErrNoRows)))
	require.False(t, postgres.NoRows(nil))
	require.False(t, postgres.NoRows(errors.New("no rows in result set")), "only pgx's sentinel, not its text")
}
