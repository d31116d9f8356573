// Command reactor runs Reckon's background workers against one database; any number of reactors
// may share it. It serves /healthz, /readyz and /metrics on its own address, and stops gracefully
// on SIGINT or SIGTERM.
//
// It dispatches effects, reconciles UNKNOWN ones and sweeps for attempts whose worker died (package
// effects). A SIGTERM lets work in flight finish within -shutdown-timeout; what is still running
// then is cancelled, recorded as UNKNOWN and reconciled later: nothing is lost.
//
// Configuration comes from flags, which default to environment variables: DATABASE_URL,
// RECKON_REACTOR_ADDR, RECKON_WORKERS, RECKON_DB_CONNS, RECKON_LOG_FORMAT.
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
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/cli"
	"github.com/reckonhq/reckon/internal/health"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("reactor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	databaseURL := fs.String("database-url", cli.Env("DATABASE_URL", cli.DefaultDatabaseURL), "Postgres connection string (env DATABASE_URL)")
	logFormat := fs.String("log-format", cli.Env("RECKON_LOG_FORMAT", "text"), "log format: text or json (env RECKON_LOG_FORMAT)")
	addr := fs.String("addr", cli.Env("RECKON_REACTOR_ADDR", "127.0.0.1:9090"), "address of the health and metrics endpoints (env RECKON_REACTOR_ADDR)")
	drain := fs.Duration("shutdown-timeout", 30*time.Second, "how long work in flight may take to finish after SIGTERM; then it is cancelled (and reconciled later)")
	workers := fs.Int("workers", envInt("RECKON_WORKERS", 50), "effects worked on at once (env RECKON_WORKERS)")
	dbConns := fs.Int("db-conns", envInt("RECKON_DB_CONNS", 20), "database connections (env RECKON_DB_CONNS); River's listener, fetches, reads and group commits share them")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "reactor: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	logger, err := cli.NewLogger(*logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "reactor:", err)
		return 2
	}
	if *workers < 1 || *dbConns < 4 {
		fmt.Fprintln(stderr, "reactor: -workers must be at least 1 and -db-conns at least 4")
		return 2
	}
	if err := serve(ctx, logger, *databaseURL, *addr, *workers, *dbConns, *drain); err != nil {
		logger.Error("reactor failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

func serve(ctx context.Context, logger *slog.Logger, databaseURL, addr string, workers, dbConns int, drain time.Duration) error {
	pool, err := cli.OpenPool(ctx, databaseURL, dbConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Logger: logger})
	if err != nil {
		return err
	}
	status, err := migrator.Status(ctx)
	if err != nil {
		return err
	}
	if !status.Current() {
		return errors.New("the database schema is not current: run `server migrate up` first")
	}

	metrics := health.NewRegistry()
	// Go connectors are registered by services that embed the reactor; HTTP connectors, read from
	// the database, are registered here.
	client, err := effects.NewClient(pool, &effects.Config{
		Registry:   effects.NewRegistry(),
		Logger:     logger,
		Registerer: metrics,
		Workers:    workers,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	mux := http.NewServeMux()
	health.Register(mux, pool, migrator, metrics)
	serveErr := cli.Serve(ctx, logger, "health", addr, mux, drain)

	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return errors.Join(serveErr, err)
	}
	if serveErr != nil {
		return serveErr
	}
	logger.Info("reactor stopped")
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
