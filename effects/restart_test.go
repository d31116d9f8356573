package effects_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A stopped client starts again at once, and works: Stop releases the reactor's liveness lock
// before it returns, rather than leaving it to the end of its connection's server process, which
// a Start right after would find still holding the id.
func TestRestartAtOnce(t *testing.T) {
	t.Parallel()
	h := setupWired(t)
	ctx := context.Background()
	for i := range 30 {
		require.NoError(t, h.client.Start(ctx), "start %d", i)
		require.NoError(t, h.client.Stop(ctx), "stop %d", i)
	}
	h.start()
	require.Equal(t, "CONFIRMED", string(h.wait(h.enqueue("bank.wire", "after-restarts", 1).ID).State))
}
