package ops_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/turns"
)

// statementCounter counts the statements a pool sends (a pgx tracer).
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// counted returns Ops over h's database whose clients all read through a pool of their own that
// counts the statements it sends.
func (h *harness) counted(t *testing.T) (*ops.Ops, *statementCounter) {
	t.Helper()
	counter := &statementCounter{}
	config := h.pool.Config()
	config.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	logger := slog.New(slog.DiscardHandler)
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: logger})
	require.NoError(t, err)
	turnsClient, err := turns.NewClient(pool, &turns.Config{Logger: logger})
	require.NoError(t, err)
	client, err := effects.NewClient(pool, &effects.Config{Registry: h.registry, Logger: logger, Plugins: []effects.Plugin{sagas, turnsClient}})
	require.NoError(t, err)
	return ops.New(pool, client, sagas, turnsClient), counter
}

// TestStuckPageEvidence: a page of the STUCK queue — effects sharing two runs and a turn, the
// steps of two sagas, a compensation — reads each kind of evidence once for the page: as many
// statements for 25 effects as for 15 (one read per distinct saga, run and turn besides), and
// each entry is exactly what Evidence returns for that effect.
func TestStuckPageEvidence(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	for _, run := range []string{"run-1", "run-2"} {
		_, err := h.effects.StartRun(ctx, effects.RunSpec{ID: run, TenantID: "acme", MaxSteps: 100})
		require.NoError(t, err)
	}
	message, err := h.turns.Submit(ctx, turns.Inbound{SessionKey: "acme:bot:alice:chat", MessageID: "m1", Content: map[string]string{"text": "pay"}})
	require.NoError(t, err)
	stuck := func(e *effects.Effect) {
		for _, to := range []effects.State{effects.StateUnknown, effects.StateStuck} {
			h.exec(t, `UPDATE reckon_effects SET state = $2, transition_actor = 'test', transition_reason = 'moved by the test' WHERE id = $1`, e.ID, string(to))
		}
	}
	for i := range 12 {
		h.insertEffect(t, "acme", connWire, fmt.Sprintf("wire-%d", i), effects.StateStuck, func(s *effects.Spec) {
			s.RunID = []string{"run-1", "run-2", ""}[i%3]
			if i%4 == 0 {
				s.TurnID = message.TurnID
			}
		})
	}
	// A compensation of a confirmed effect, STUCK.
	confirmed := h.insertEffect(t, "acme", connWire, "confirmed", effects.StateConfirmed)
	compensation, err := h.effects.Compensate(ctx, confirmed.ID, "test", "refund asked", nil)
	require.NoError(t, err)
	stuck(compensation)
	// Two sagas' first steps, STUCK.
	for i := range 2 {
		s, err := h.sagas.Start(ctx, "pay", map[string]int{"n": i}, &saga.StartOpts{TenantID: "acme"})
		require.NoError(t, err)
		step, err := h.effects.Get(ctx, s.Steps[0].EffectID)
		require.NoError(t, err)
		stuck(step)
	}
	counted, counter := h.counted(t)

	counter.n.Store(0)
	evidence, total, _, err := counted.Stuck(ctx, acmeOnly, 50, "")
	require.NoError(t, err)
	statements := counter.n.Load()
	require.Equal(t, 15, total)
	require.Len(t, evidence, 15)
	t.Logf("a STUCK page of %d effects (2 runs, 1 turn, 2 sagas): %d statements", len(evidence), statements)
	for i := range 10 { // as many statements for a longer page
		h.insertEffect(t, "acme", connMail, fmt.Sprintf("mail-%d", i), effects.StateStuck)
	}
	counter.n.Store(0)
	longer, _, _, err := counted.Stuck(ctx, acmeOnly, 50, "")
	require.NoError(t, err)
	require.Len(t, longer, 25)
	require.Equal(t, statements, counter.n.Load(), "statements for a page of 25 as for 15")

	var sawRun, sawTurn, sawSaga, sawCompensates bool
	for _, ev := range evidence {
		one, err := counted.Evidence(ctx, acmeOnly, ev.Effect.ID)
		require.NoError(t, err)
		require.Equal(t, ev, one, "evidence of %s", ev.Effect.ID)
		require.NotEmpty(t, ev.History)
		sawRun, sawTurn = sawRun || ev.Run != nil, sawTurn || ev.Turn != nil
		sawSaga, sawCompensates = sawSaga || ev.Saga != nil, sawCompensates || ev.Compensates != nil
	}
	require.True(t, sawRun && sawTurn && sawSaga && sawCompensates)
}
