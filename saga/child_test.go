package saga_test

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/saga"
)

// childReactorEnv, when set, makes the test binary run as a reactor process with the order saga
// instead of running tests — the way a Go service runs the reactor in its own process. Crash
// tests start such processes and kill them. The child reads DATABASE_URL and BANK_URL, registers
// the bank connectors with checkpoints, and runs until SIGTERM.
const childReactorEnv = "RECKON_TEST_SAGA_CHILD_REACTOR"

func runChildReactor() int {
	return testkit.RunReactor(func(pool *pgxpool.Pool, logger *slog.Logger) (*effects.Client, error) {
		registry := effects.NewRegistry()
		callTimeout := testkit.EnvDuration("CHILD_CALL_TIMEOUT", time.Second) // takeover tests hold a call for longer
		registerConnectors(registry, os.Getenv("BANK_URL"), true, callTimeout)
		config := effectsConfig(registry)
		config.Logger = logger
		// Takeover tests set a margin such that only the takeover may finish the work soon.
		config.InFlightMargin = testkit.EnvDuration("CHILD_IN_FLIGHT_MARGIN", config.InFlightMargin)
		sc, err := saga.NewClient(pool, &saga.Config{Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("saga client: %w", err)
		}
		config.Plugins = []effects.Plugin{sc}
		ec, err := effects.NewClient(pool, config)
		if err != nil {
			return nil, fmt.Errorf("effects client: %w", err)
		}
		sc.MustRegister(orderSaga(0))
		return ec, nil
	})
}
