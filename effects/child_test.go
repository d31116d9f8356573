package effects_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/fakebank"
	"github.com/reckonhq/reckon/internal/fakejobs"
)

// childReactorEnv, when set, makes the test binary run as a reactor process instead of running
// tests — the way a Go service runs the reactor in its own process. Crash tests start such
// processes and kill them. The child reads DATABASE_URL and BANK_URL, registers the bank
// connector with checkpoints, and runs until SIGTERM.
const childReactorEnv = "RECKON_TEST_CHILD_REACTOR"

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
		callTimeout = timeout
	}
	registry.MustRegister(fakebank.ConnectorOptions{
		BaseURL: os.Getenv("BANK_URL"), StatusCheck: true, Compensate: true, Checkpoints: true,
		Timeout: callTimeout, Backoff: fastBackoff,
	}.Connector())
	registry.MustRegister(holdingAsyncConnector(os.Getenv("BANK_URL"), callTimeout))
	if jobsURL := os.Getenv("JOBS_URL"); jobsURL != "" { // async tests: the fake jobs upstream
		registry.MustRegister(fakejobs.ConnectorOptions{
			BaseURL: jobsURL, CallbackURL: os.Getenv("CALLBACK_URL"), Timeout: time.Second, Backoff: fastBackoff,
			StatusCheckLimit: 1000,
		}.Connector())
	}
	config := testConfig(registry)
	config.Logger = logger
	config.InFlightMargin = time.Second
	if margin, err := time.ParseDuration(os.Getenv("CHILD_IN_FLIGHT_MARGIN")); err == nil {
		config.InFlightMargin = margin // takeover tests: only the takeover may finish the work soon
	}
	client, err := effects.NewClient(pool, config)
	if err != nil {
		logger.Error("child: client", slog.String("error", err.Error()))
		return 1
	}
	if err := client.Start(ctx); err != nil {
		logger.Error("child: start", slog.String("error", err.Error()))
		return 1
	}
	logger.Info("listening", slog.String("addr", "child-reactor"))
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		logger.Error("child: stop", slog.String("error", err.Error()))
		return 1
	}
	return 0
}
