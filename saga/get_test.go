package saga_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/saga"
)

// GetTx reads in the caller's transaction: it sees a saga StartTx started there, with its first
// step, before the commit (Get does not), and an unknown id is ErrNotFound with the transaction
// still usable.
func TestGetTxSeesTheTransaction(t *testing.T) {
	h := setup(t, 1)
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		s, err := h.sagas.StartTx(ctx, tx, "order", order{Account: "a-1", Amount: 10}, nil)
		require.NoError(t, err)
		got, err := h.sagas.GetTx(ctx, tx, s.ID)
		require.NoError(t, err)
		require.Equal(t, saga.StateRunning, got.State)
		require.Len(t, got.Steps, 1)
		_, err = h.sagas.Get(ctx, s.ID)
		require.ErrorIs(t, err, saga.ErrNotFound, "not committed yet")
		_, err = h.sagas.GetTx(ctx, tx, uuid.New())
		require.ErrorIs(t, err, saga.ErrNotFound)
		_, err = h.sagas.GetTx(ctx, tx, s.ID)
		return err // tx still usable
	}))
}
