package effects_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
)

// lockedLog is a log sink safe for the reactor's goroutines.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestOutcomeWriteSurvivesMigrationLock: while a call is out, a migration takes reckon_effects (as
// an online upgrade's ALTER TABLE or CREATE TRIGGER does) and holds it longer than the reactor's
// lock_timeout. The group commit of the known outcome is aborted (55P03) and runs again until the
// table is free: the non-idempotent effect is CONFIRMED by its one call, never left to be found
// UNKNOWN by a second run of its job.
func TestOutcomeWriteSurvivesMigrationLock(t *testing.T) {
	t.Parallel()
	var logs lockedLog
	h := setup(t, func(c *effects.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	ctx := context.Background()
	// The reactor's connections wait at most 100 ms for a lock, so that the migration's lock
	// aborts its write rather than delaying it.
	_, err := h.pool.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET lock_timeout = %L', current_database(), '100ms'); END $$`)
	require.NoError(t, err)
	h.pool.Reset()

	var calls int
	var mu sync.Mutex
	migrated := make(chan struct{})
	require.NoError(t, h.registry.Register(effects.Connector{
		Name: "locked.wire", Tags: []effects.Tag{effects.TagWrite, effects.TagExternal, effects.TagNetwork}, Unsafe: true,
		Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			held := make(chan struct{})
			go func() { // the migration: takes the table, holds it 500 ms
				defer close(migrated)
				tx, err := h.pool.Begin(context.Background())
				if err != nil {
					close(held)
					return
				}
				defer func() { _ = tx.Rollback(context.Background()) }()
				_, _ = tx.Exec(context.Background(), `SET LOCAL lock_timeout = 0`)
				_, _ = tx.Exec(context.Background(), `LOCK TABLE reckon_effects IN SHARE ROW EXCLUSIVE MODE`)
				close(held)
				time.Sleep(500 * time.Millisecond)
			}()
			<-held
			return json.RawMessage(`{"wire_id":"w-1"}`), nil
		},
	}))
	h.start()
	effect, err := h.client.Enqueue(ctx, effects.Spec{Connector: "locked.wire", IdempotencyKey: "k-1", Args: map[string]any{"amount": 1}}, nil)
	require.NoError(t, err)
	settled := h.wait(effect.ID)
	<-migrated
	require.Equal(t, effects.StateConfirmed, settled.State)
	require.Equal(t, []string{">PENDING", "PENDING>CONFIRMED"}, h.path(effect.ID))
	mu.Lock()
	require.Equal(t, 1, calls)
	mu.Unlock()
	require.Contains(t, logs.String(), "transaction aborted by Postgres; running it again")
	require.Contains(t, logs.String(), "55P03")
}
