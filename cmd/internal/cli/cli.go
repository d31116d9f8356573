// Package cli holds the plumbing Reckon's binaries (server, reactor, demo, bench) share, so that
// each is done one way: main's signal handling (Main), flags that default to environment
// variables (Env, EnvFlags), logging (NewLogger), the database pool with its migrator
// (OpenDatabase), periodic work (Every), and the one HTTP server that stops gracefully (Serve,
// ServeOn).
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/postgres"
)

// DefaultDatabaseURL is the database used when DATABASE_URL is not set: the local Postgres.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/reckon?sslmode=disable"

// Main runs run with a context that ends on SIGINT or SIGTERM, then exits with the status run
// returns. Every binary's main is one call of it.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// Env returns the environment variable name, or def when it is unset or empty.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// NewLogger returns a logger writing to stderr as format ("text" or "json") the records at level
// and above: "debug", "info", "warn" or "error" (ParseLogLevel). The binaries' -log-format and
// -log-level flags (RECKON_LOG_FORMAT, RECKON_LOG_LEVEL) are its arguments; a value it does not
// know is an error naming the flag.
func NewLogger(format, level string) (*slog.Logger, error) {
	lvl, err := ParseLogLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
}

// DefaultLogLevel is -log-level's default.
const DefaultLogLevel = "info"

// ParseLogLevel reads a -log-level value: debug, info, warn or error (any case).
func ParseLogLevel(level string) (slog.Level, error) {
	switch strings.ToLower(level) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	default:
		return 0, fmt.Errorf("-log-level %q (or RECKON_LOG_LEVEL): want debug, info, warn or error", level)
	}
}

// OpenDatabase is postgres.OpenPool with the migrator of the pool, which reads (and applies) the schema's
// migrations and logs to logger. schema is the -schema flag (SchemaFlagUsage): "" or "public" is the
// database's default schema. The caller closes the pool.
func OpenDatabase(ctx context.Context, databaseURL string, maxConns int, schema string, logger *slog.Logger) (*pgxpool.Pool, *db.Migrator, error) {
	schema = poolSchema(schema)
	pool, err := postgres.OpenPool(ctx, databaseURL, maxConns, schema)
	if err != nil {
		return nil, nil, err
	}
	migrator, err := db.NewMigrator(pool, &db.MigratorConfig{Logger: logger, Schema: schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, migrator, nil
}

// SchemaFlagUsage is the usage text of every binary's -schema flag, whose default is
// Env("RECKON_SCHEMA", "public").
const SchemaFlagUsage = "Postgres schema of Reckon's and River's tables: lowercase letters, digits and underscores; created by `server migrate up` (env RECKON_SCHEMA)"

// CheckSchema checks a -schema value (db.ValidateSchema); the error names the flag.
func CheckSchema(schema string) error {
	if err := db.ValidateSchema(schema); err != nil {
		return fmt.Errorf("-schema (or RECKON_SCHEMA): %w", err)
	}
	return nil
}

// poolSchema is the schema OpenDatabase gives the pool: none for public, the database's default
// (so that a default deployment's connections stay exactly as before: search_path untouched).
func poolSchema(schema string) string {
	if schema == "public" {
		return ""
	}
	return schema
}

// maxCancelGrace bounds the part of Serve's drain kept for cancelled requests to return.
const maxCancelGrace = 2 * time.Second

// Serve listens on addr and serves handler until ctx ends, then shuts down within opts.Drain:
// requests in flight may finish during most of it; those still running then (a hung client, a
// request waiting for a database connection) have their contexts cancelled and their connections
// closed, and get the rest of the drain (at most maxCancelGrace) to return. Request contexts do not
// end with ctx itself, so a SIGTERM never interrupts a request that can finish in time. Every
// connection is bounded by opts.Timeouts (slow headers or body, an unread response, an idle
// keep-alive); invalid timeouts are an error before anything is served. With opts.TLS it serves
// HTTPS (TLS 1.2 at least, HTTP/2 offered), reading the certificate and key first: a file missing
// or unreadable, or a key that does not match, is an error before anything is served. It logs the
// address it listens on (useful with port 0); name labels its log lines and errors ("http",
// "health").
func Serve(ctx context.Context, logger *slog.Logger, name, addr string, handler http.Handler, opts *ServeOpts) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	return ServeOn(ctx, logger, name, listener, handler, opts)
}

// ServeOn is Serve on a listener the caller opened (to know at once that the address is free, or
// which port it got), which it closes.
func ServeOn(ctx context.Context, logger *slog.Logger, name string, listener net.Listener, handler http.Handler, opts *ServeOpts) error {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		_ = listener.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	tlsConfig, err := o.TLS.Config()
	if err != nil {
		_ = listener.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	drain := o.Drain
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	var inFlight atomic.Int64
	server := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			handler.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: min(o.ReadHeader, o.Read),
		ReadTimeout:       o.Read,
		WriteTimeout:      o.Write,
		IdleTimeout:       o.Idle,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
		TLSConfig:         tlsConfig,
	}
	logger.Info("listening", slog.String("server", name), slog.String("addr", listener.Addr().String()), slog.Bool("tls", tlsConfig != nil))

	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- server.ServeTLS(listener, "", "") // the certificate is TLSConfig's
			return
		}
		errc <- server.Serve(listener)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
	}
	deadline := time.Now().Add(drain)
	grace := min(drain/4, maxCancelGrace)
	shutdownCtx, cancel := context.WithDeadline(context.Background(), deadline.Add(-grace))
	err = server.Shutdown(shutdownCtx)
	cancel()
	if err != nil {
		logger.Warn("shutdown: cancelling the requests still running", slog.String("server", name), slog.Int64("requests", inFlight.Load()), slog.Duration("after", drain-grace))
		cancelRequests()
		_ = server.Close() // closes every connection: a hung client's request ends too
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for inFlight.Load() > 0 && time.Now().Before(deadline) {
			<-tick.C
		}
		if n := inFlight.Load(); n > 0 {
			return fmt.Errorf("%s: shutdown: %d requests still running after -shutdown-timeout %s", name, n, drain)
		}
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
