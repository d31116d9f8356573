package saga_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/saga"
)

// childReactorEnv, when set, makes the test binary run as a reactor process with the order saga
// instead of running tests — the way a Go service runs the reactor in its own process. Crash
// tests start such processes and kill them. The child reads DATABASE_URL and BANK_URL, registers
// the bank connectors with checkpoints, and runs until SIGTERM.
const childReactorEnv = "RECKON_TEST_SAGA_CHILD_REACTOR"

func runChildReactor() int {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		logger.Error("child: pool", slog.String("error", err.Error()))
		return 1
	}
	defer pool.Close()
	registry := effects.NewRegistry()
	callTimeout := time.Second
	if timeout, err := time.ParseDuration(os.Getenv("CHILD_CALL_TIMEOUT")); err == nil {
		callTimeout = timeout // takeover tests hold a call for longer
	}
	registerConnectors(registry, os.Getenv("BANK_URL"), true, callTimeout)
	config := effectsConfig(registry)
	config.Logger = logger
	if margin, err := time.ParseDuration(os.Getenv("CHILD_IN_FLIGHT_MARGIN")); err == nil {
		config.InFlightMargin = margin // takeover tests: only the takeover may finish the work soon
	}
	sc, err := saga.NewClient(pool, &saga.Config{Logger: logger})
	if err != nil {
		logger.Error("child: saga client", slog.String("error", err.Error()))
		return 1
	}
	config.Plugins = []effects.Plugin{sc}
	ec, err := effects.NewClient(pool, config)
	if err != nil {
		logger.Error("child: effects client", slog.String("error", err.Error()))
		return 1
	}
	sc.MustRegister(orderSaga(0))
	if err := ec.Start(ctx); err != nil {
		logger.Error("child: start", slog.String("error", err.Error()))
		return 1
	}
	logger.Info("listening", slog.String("addr", "child-reactor"))
	<-ctx.Done()
	if err := ec.Stop(context.WithoutCancel(ctx)); err != nil {
		logger.Error("child: stop", slog.String("error", err.Error()))
		return 1
	}
	return 0
}
