// Command reactor runs Reckon's background workers against one database; any number of reactors
// may share it. It serves /healthz, /readyz and /metrics on its own address, and stops gracefully
// on SIGINT or SIGTERM.
//
// It dispatches effects, reconciles UNKNOWN ones, runs compensations and sweeps for attempts whose
// worker died (package effects), with the HTTP connectors stored in the database (package
// effects/httpconn) and the saga definitions (package saga/sagadef): both loaded at start and
// reloaded every -connector-sync-interval, so connectors added with `server connectors put` and
// definitions added with `server sagas define` are picked up without a restart.
//
// A SIGTERM stops fetching new work and lets work in flight finish within -shutdown-timeout; what
// is still running then is cancelled, recorded as UNKNOWN and reconciled by any reactor: nothing is
// lost.
//
// Configuration comes from flags, which default to environment variables: DATABASE_URL,
// RECKON_REACTOR_ADDR, RECKON_REACTOR_ID, RECKON_QUEUE, RECKON_WORKERS, RECKON_DB_CONNS,
// RECKON_SHUTDOWN_TIMEOUT, RECKON_IN_FLIGHT_MARGIN, RECKON_SWEEP_INTERVAL,
// RECKON_CONNECTOR_SYNC_INTERVAL, RECKON_FETCH_POLL_INTERVAL, RECKON_FETCH_COOLDOWN,
// RECKON_CLAIM_INTERVAL, RECKON_ASYNC_TIMEOUT, RECKON_STATS_INTERVAL, RECKON_TURN_HANDLER_URL,
// RECKON_TURN_HANDLER_TIMEOUT, RECKON_TURN_NOT_READY_DELAY, RECKON_EFFECT_RETENTION,
// RECKON_AUDIT_RETENTION, RECKON_EVENT_RETENTION, RECKON_DEDUP_WINDOW, RECKON_IDEMPOTENCY_TTL,
// RECKON_RETENTION_INTERVAL, RECKON_RETENTION_BATCH, RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION, RECKON_CONFIRMATION_TTL,
// RECKON_FOUR_EYES, RECKON_LOG_FORMAT, RECKON_LOG_LEVEL. Tracing is off unless the standard
// OTEL_* variables turn it on (docs/operations.md, "Tracing").
//
// It runs retention (package retention, docs/operations.md "Retention"): when it starts it makes
// the partitions of the audit histories and of the event log ahead, and the leader among the
// reactors prunes settled work past -effect-retention, audit history past -audit-retention and
// events past -event-retention (but those an active webhook subscription still needs) every
// -retention-interval (0: this reactor never does). River's cleaner keeps finished jobs min(24h, -effect-retention).
//
// It runs the logical turns of sessions (package turns) with an HTTP turn handler (package
// turns/httpturn): each turn is POSTed to its tenant's handler (PUT /v1/turn-handlers/{tenant})
// or else to -turn-handler-url, and the effects answered are committed with the turn. A tenant
// with neither: its turns wait, with their messages, and the log says so.
//
// It delivers the webhook subscriptions (package events, Webhooks; docs/api.md "Webhook
// subscriptions"): each delivery is an effect of the built-in connector reckon.webhook. `reactor -h` lists them with their defaults.
//
// `reactor version [-o json]` and `reactor -version` print the version, commit and Go version it
// was built from, and exit without touching the database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/cmd/internal/health"
	"github.com/reckonhq/reckon/cmd/internal/telemetry"
	"github.com/reckonhq/reckon/cmd/internal/version"
	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/retention"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "version" {
		return runVersion(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("reactor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := parseConfig(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "reactor:", err)
		return 2
	}
	if cfg.version {
		return runVersion(nil, stdout, stderr)
	}
	logger, err := cli.NewLogger(cfg.logFormat, cfg.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "reactor:", err)
		return 2
	}
	// A line logged with a recording span's context (tracing on) carries its trace_id and span_id.
	logger = slog.New(telemetry.NewLogHandler(logger.Handler()))
	// Tracing, if the OTEL_* variables ask for it; its spans are flushed last, on the way out.
	shutdownTracing, err := telemetry.Setup(ctx, logger, "reckon-reactor")
	if err != nil {
		fmt.Fprintln(stderr, "reactor:", err)
		if errors.Is(err, telemetry.ErrConfig) {
			return 2
		}
		return 1
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdown)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			logger.Warn("tracing: spans not flushed at shutdown", slog.String("error", err.Error()))
		}
	}()
	if err := serve(ctx, logger, cfg); err != nil {
		logger.Error("reactor failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

// runVersion is `reactor version [-o text|json]`: what this binary was built from (package version),
// printed to stdout without a database.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reactor version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "text", "output: text (one line) or json")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case err == nil && *output != "text" && *output != "json":
		err = fmt.Errorf("-o %q: want text or json", *output)
	}
	if err != nil {
		fmt.Fprintln(stderr, "reactor:", err)
		return 2
	}
	if err := version.Print(stdout, "reactor", *output); err != nil {
		fmt.Fprintln(stderr, "reactor:", err)
		return 1
	}
	return 0
}

// serve runs the reactor until ctx ends or it is taken for dead, then drains the work in flight
// within -shutdown-timeout.
func serve(ctx context.Context, logger *slog.Logger, cfg *config) error {
	pool, migrator, err := openCurrent(ctx, logger, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	metrics := health.NewRegistry()
	built, err := newEngine(pool, cfg, logger, metrics) // engine.go
	if err != nil {
		return err
	}
	if err := built.Definitions.Load(ctx); err != nil {
		return err
	}
	client := built.Effects
	// Not ctx: River treats the cancellation of Start's context as a hard stop that cancels the
	// jobs in flight at once. SIGTERM ends ctx; Stop below drains gracefully instead.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	// Reload the HTTP connectors, then the saga definitions, when one changes and every
	// -connector-sync-interval. A failed reload keeps what is loaded.
	syncCtx, stopSync := context.WithCancel(ctx)
	syncDone := make(chan struct{})
	go func() {
		defer close(syncDone)
		built.Definitions.Run(syncCtx, cfg.syncInterval, client)
	}()
	serveErr, fatal := serveUntilStopped(ctx, logger, cfg, pool, migrator, metrics, client)
	logger.Info("reactor stopping: draining work in flight", slog.Duration("shutdown_timeout", cfg.shutdown))
	stopSync()
	<-syncDone
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdown)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return errors.Join(serveErr, err)
	}
	if serveErr != nil {
		return serveErr
	}
	return fatal // nil: effects.Client.Stop logged "reactor stopped"
}

// openCurrent opens the database, refuses one whose schema is not current and makes the
// partitions of the audit histories and the event log ahead.
func openCurrent(ctx context.Context, logger *slog.Logger, cfg *config) (*pgxpool.Pool, *db.Migrator, error) {
	pool, migrator, err := cli.OpenDatabase(ctx, cfg.databaseURL, cfg.dbConns, cfg.schema, logger)
	if err != nil {
		return nil, nil, err
	}
	status, err := migrator.Status(ctx)
	if err == nil && !status.Current() {
		err = errors.New("the database schema is not current: run `server migrate up` first")
	}
	if err == nil {
		err = ensurePartitions(ctx, logger, pool)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, migrator, nil
}

// ensurePartitions makes partitions ahead, before any work: a lock timeout (a schema change in
// progress) is not worth failing the start for, the retention job makes them later and the
// default partition takes what no partition covers meanwhile.
func ensurePartitions(ctx context.Context, logger *slog.Logger, pool *pgxpool.Pool) error {
	created, err := retention.EnsurePartitions(ctx, pool, time.Now())
	switch {
	case errors.Is(err, retention.ErrLockTimeout):
		logger.Warn("audit partitions: not made now; the retention job will", slog.String("error", err.Error()))
	case err != nil:
		return err
	case created > 0:
		logger.Info("audit partitions made ahead", slog.Int("created", created))
	}
	return nil
}

// serveUntilStopped serves health and metrics until ctx ends or the reactor is taken for dead (its
// database connection was lost for too long and its jobs were handed to other reactors: it must be
// restarted). It returns the error of serving and the fatal error of client, if any.
func serveUntilStopped(ctx context.Context, logger *slog.Logger, cfg *config, pool *pgxpool.Pool, migrator *db.Migrator, metrics *prometheus.Registry, client *effects.Client) (serveErr, fatal error) {
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	fatalCh := make(chan error, 1)
	go func() {
		defer close(fatalCh)
		select {
		case err := <-client.Fatal():
			fatalCh <- err
			stopServing()
		case <-serveCtx.Done():
		}
	}()
	serveErr = serveHealth(serveCtx, logger, cfg, pool, migrator, metrics)
	stopServing()
	return serveErr, <-fatalCh
}

// serveHealth serves /healthz, /readyz and /metrics until ctx ends.
func serveHealth(ctx context.Context, logger *slog.Logger, cfg *config, pool *pgxpool.Pool, migrator *db.Migrator, metrics *prometheus.Registry) error {
	mux := http.NewServeMux()
	health.Register(mux, pool, migrator, metrics)
	return cli.Serve(ctx, logger, "health", cfg.addr, mux, &cli.ServeOpts{Drain: cfg.shutdown}) // the default timeouts
}

// takeoverGrace is -takeover-grace as effects.Config.TakeoverGrace, where 0 means the default and
// a negative value none.
func takeoverGrace(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}
