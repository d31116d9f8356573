package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestValidateSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string // want: "" for valid, else a part of the error
	}{
		{"cell1", ""},
		{"_cell", ""},
		{"public", ""},
		{strings.Repeat("c", db.MaxSchemaLength), ""},
		{"", "empty name"},
		{strings.Repeat("c", db.MaxSchemaLength+1), "longer than 46 characters"},
		{"Cell1", "want lowercase letters"},
		{"1cell", "want lowercase letters"},
		{"cell-1", "want lowercase letters"},
		{"cell 1", "want lowercase letters"},
		{`cell"; DROP TABLE reckon_effects; --`, "want lowercase letters"},
		{"céll", "want lowercase letters"},
		{"pg_cell", "Postgres reserves"},
		{"information_schema", "Postgres reserves"},
	} {
		err := db.ValidateSchema(tc.name)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorContains(t, err, tc.want, tc.name)
		}
	}
}

// ConfigureSchema sets search_path to the schema and its River schema, and leaves the config alone when it
// refuses the name.
func TestConfigureSchema(t *testing.T) {
	t.Parallel()
	config, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:1/d?application_name=x")
	require.NoError(t, err)
	require.NoError(t, db.ConfigureSchema(config, "cell1"))
	require.Equal(t, `"cell1", "cell1_river"`, config.ConnConfig.RuntimeParams["search_path"])
	require.Equal(t, "x", config.ConnConfig.RuntimeParams["application_name"])
	require.Error(t, db.ConfigureSchema(config, "Bad"))
	require.Equal(t, `"cell1", "cell1_river"`, config.ConnConfig.RuntimeParams["search_path"])
}

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
