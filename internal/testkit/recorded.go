package testkit

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// Rows is what RequireRecordedOnce queries: a pool, a connection or a transaction.
type Rows interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// RequireRecordedOnce fails the test unless every effect in the database has exactly one insert in
// its history and exactly one event for it in reckon_event_log, and nothing in the database is a
// ghost (pgtest.RequireNoGhosts): no history or event about an effect, saga, turn or run that never
// existed. It returns how many effects there are.
func RequireRecordedOnce(tb testing.TB, db Rows) int {
	tb.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT e.id::text,
		       (SELECT count(*) FROM reckon_effect_transitions t WHERE t.effect_id = e.id AND t.from_state IS NULL),
		       (SELECT count(*) FROM reckon_event_log l WHERE l.effect_id = e.id
		          AND l.type IN ('tool.authorized', 'effect.compensation', 'effect.awaiting_confirmation'))
		FROM reckon_effects e ORDER BY e.id`)
	require.NoError(tb, err)
	type recorded struct {
		ID      string
		Inserts int
		Events  int
	}
	effects, err := pgx.CollectRows(rows, pgx.RowToStructByPos[recorded])
	require.NoError(tb, err)
	for _, e := range effects {
		require.Equal(tb, 1, e.Inserts, "effect %s: history rows of its insert", e.ID)
		require.Equal(tb, 1, e.Events, "effect %s: events of its insert", e.ID)
	}
	pgtest.RequireNoGhosts(tb, db)
	return len(effects)
}
