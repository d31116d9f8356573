package saga_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
)

// BenchmarkThreeStepSagas measures sagas of three steps completed per second by one reactor, with
// connectors that answer at once: the cost of the engine (three effects, three settle hooks, the
// saga's own rows), not of an upstream. Reported as sagas/s.
func BenchmarkThreeStepSagas(b *testing.B) {
	pool := pgtest.NewDB(b)
	registry := effects.NewRegistry()
	for _, name := range []string{"a", "b", "c"} {
		registry.MustRegister(effects.Connector{
			Name: name, Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent},
			Dispatch: func(ctx context.Context, call effects.Call) (json.RawMessage, error) {
				return json.RawMessage(`{"ok":true}`), nil
			},
		})
	}
	config := effectsConfig(registry)
	config.Workers = 50
	sc, err := saga.NewClient(pool, &saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	config.Plugins = []effects.Plugin{sc}
	ec, err := effects.NewClient(pool, config)
	require.NoError(b, err)
	step := func(connector string) saga.Step {
		return saga.Step{Name: connector, Undo: saga.NoUndo(), Effect: func(saga.Input) (effects.Spec, error) {
			return effects.Spec{Connector: connector}, nil
		}}
	}
	sc.MustRegister(saga.Definition{Name: "bench", Steps: []saga.Step{step("a"), step("b"), step("c")}})
	ctx := context.Background()
	require.NoError(b, ec.Start(ctx))
	b.Cleanup(func() { require.NoError(b, ec.Stop(context.Background())) })

	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += 100 {
		require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for j := i; j < min(i+100, b.N); j++ {
				if _, err := sc.StartTx(ctx, tx, "bench", nil, nil); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	for {
		var done int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM reckon_sagas WHERE state = 'COMPLETED'`).Scan(&done))
		if done == b.N {
			break
		}
		time.Sleep(5 * time.Millisecond) // a benchmark's poll: nothing to await
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sagas/s")
}
