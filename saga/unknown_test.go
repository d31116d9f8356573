package saga_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/saga"
)

// TestOnUnknownDefinition: a start naming an unregistered definition asks the fallback, in the
// start's transaction, and succeeds once the fallback registered it; a fallback that fails or
// registers nothing leaves the start refused and nothing written.
func TestOnUnknownDefinition(t *testing.T) {
	t.Parallel()
	h := setup(t, 0)
	ctx := context.Background()
	var asked []string
	var fail error
	loader := func(ctx context.Context, tx pgx.Tx, c *saga.Client, name string) error {
		asked = append(asked, name)
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil { // the caller's transaction
			return err
		}
		if fail != nil {
			return fail
		}
		if name == "order-copy" {
			def := orderSaga(0)
			def.Name = name
			return c.Register(def)
		}
		return nil
	}
	h.effects, h.sagas = h.newClientsWith(effectsConfig(h.registry), saga.Config{OnUnknownDefinition: loader}, 0)

	_, err := h.sagas.Start(ctx, "nothing-here", order{Account: "a-1", Amount: 5}, nil)
	require.ErrorIs(t, err, saga.ErrUnknownDefinition)
	fail = errors.New("database unreachable")
	_, err = h.sagas.Start(ctx, "order-copy", order{Account: "a-1", Amount: 5}, nil)
	require.ErrorContains(t, err, "database unreachable")
	require.False(t, h.sagas.Registered("order-copy"))
	require.Zero(t, h.count(`SELECT count(*) FROM reckon_sagas`))

	fail = nil
	s, err := h.sagas.Start(ctx, "order-copy", order{Account: "a-1", Amount: 5}, nil)
	require.NoError(t, err)
	require.Equal(t, "order-copy", s.Name)
	require.True(t, h.sagas.Registered("order-copy"))
	_, err = h.sagas.Start(ctx, "order", order{Account: "a-1", Amount: 5}, nil)
	require.NoError(t, err, "a registered definition never asks")
	require.Equal(t, []string{"nothing-here", "order-copy", "order-copy"}, asked)
	require.Equal(t, 2, h.count(`SELECT count(*) FROM reckon_sagas`))
}
