package operator_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is a Store on a database of its own.
type harness struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *operator.Store
}

func setup(t *testing.T) *harness {
	t.Helper()
	t.Parallel()
	pool := pgtest.NewDB(t)
	return &harness{t: t, ctx: context.Background(), pool: pool, store: operator.NewStore(pool)}
}

// add adds an operator and fails the test if it cannot.
func (h *harness) add(name string, role operator.Role, tenants []string) (string, *operator.Operator) {
	h.t.Helper()
	token, op, err := h.store.Add(h.ctx, name, role, tenants)
	require.NoError(h.t, err)
	return token, op
}

// count runs a count(*) query.
func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return testkit.Count(h.t, h.pool, sql, args...)
}

// exec runs a statement.
func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	_, err := h.pool.Exec(h.ctx, sql, args...)
	require.NoError(h.t, err, sql)
}
