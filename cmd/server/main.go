// Command server is Reckon's HTTP server: the API, callbacks, health and metrics. Its migrate
// subcommand manages the database schema.
//
//	server [flags]                      serve (SIGINT or SIGTERM stops it gracefully)
//	server migrate up [-create-db]      apply pending migrations (River's, then Reckon's)
//	server migrate down [-steps N|-all] roll back Reckon's newest migration(s); -all removes River's too
//	server migrate status               list migrations and whether they are applied
//	server tenants create|list|disable|enable   manage tenants
//	server tokens create -tenant T [-name N]     print a new API token for T (shown once)
//	server tokens list -tenant T | revoke ID     list or revoke API tokens
//	server operators add|list|revoke    operator accounts of the console and CLI (docs/operations.md)
//	server effects list|show|resolve|cancel   operators' view of effects and their decisions (docs/operations.md)
//	server connectors put|list|delete   manage the HTTP connectors (docs/connectors.md)
//	server connectors limit show|set|clear|reset [NAME]   operators' limits of connectors (docs/operations.md)
//	server sagas list|show|resolve      operators' view of sagas and their decisions (docs/operations.md)
//	server sagas define -f F | definitions   manage the saga definitions (docs/api.md)
//	server runs show|cancel -tenant T ID     a run's guardrails and pending events; cancel it (docs/operations.md)
//	server retention status|run|policy|partitions   what retention keeps and prunes (docs/operations.md)
//	server events tail [-pattern P …] [-after ID] [-tenant T]   follow the event stream (docs/operations.md)
//	server schedules list|set|delete    periodic effects of a tenant, once per tick (docs/operations.md)
//	server mcp -token T [-wait D]       an MCP server over stdin and stdout: T's connectors as tools (docs/mcp.md)
//	server version [-o json] | -version   the version, commit and Go version it was built from
//	server -h | help [COMMAND]          list the commands and serve's flags; COMMAND -h describes one
//
// Configuration comes from flags, which default to environment variables: DATABASE_URL,
// RECKON_SERVER_ADDR, RECKON_LOG_FORMAT, RECKON_LOG_LEVEL, RECKON_MAX_BODY_BYTES,
// RECKON_MAX_BODY_BYTES_IN_FLIGHT, RECKON_IDEMPOTENCY_TTL, RECKON_CONNECTOR_SYNC_INTERVAL, RECKON_CONSOLE_SESSION_TTL,
// RECKON_CONSOLE_SECURE_COOKIES, RECKON_DB_CONNS, RECKON_SHUTDOWN_TIMEOUT,
// RECKON_READ_HEADER_TIMEOUT, RECKON_READ_TIMEOUT, RECKON_WRITE_TIMEOUT, RECKON_IDLE_TIMEOUT,
// RECKON_TLS_CERT, RECKON_TLS_KEY (both or neither: HTTPS), RECKON_REQUIRE_IRREVERSIBLE_CONFIRMATION,
// RECKON_CONFIRMATION_TTL, RECKON_FOUR_EYES (the confirmation holds of the effects its API
// enqueues), RECKON_MCP_WAIT (how long an MCP tool call waits for its effect, docs/mcp.md); a value that cannot be parsed or is
// out of range is refused (exit status 2), a certificate or key that cannot be read is exit
// status 1. Tracing is off unless the standard OTEL_* variables turn it on (docs/operations.md,
// "Tracing"). The API is documented in docs/api.md.
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
	"slices"
	"strings"
	"time"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/cmd/internal/definitions"
	"github.com/reckonhq/reckon/cmd/internal/health"
	"github.com/reckonhq/reckon/cmd/internal/telemetry"
	"github.com/reckonhq/reckon/cmd/internal/version"
	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/console"
	"github.com/reckonhq/reckon/cmd/server/internal/httpobs"
	"github.com/reckonhq/reckon/cmd/server/internal/mcpgw"
	"github.com/reckonhq/reckon/cmd/server/internal/operator"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/events"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// errUsage marks a mistake in the command line: exit status 2.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	command := ""
	if len(args) > 0 {
		command = args[0]
	}
	switch command {
	case "migrate":
		err = runMigrate(ctx, args[1:], stdout, stderr)
	case "tenants":
		err = runTenants(ctx, args[1:], stdout, stderr)
	case "tokens":
		err = runTokens(ctx, args[1:], stdout, stderr)
	case "operators":
		err = runOperators(ctx, args[1:], stdout, stderr)
	case "connectors":
		err = runConnectors(ctx, args[1:], os.Stdin, stdout, stderr)
	case "sagas":
		err = runSagas(ctx, args[1:], os.Stdin, stdout, stderr)
	case "runs":
		err = runRuns(ctx, args[1:], stdout, stderr)
	case "retention":
		err = runRetention(ctx, args[1:], stdout, stderr)
	case "effects":
		err = runEffects(ctx, args[1:], stdout, stderr)
	case "events":
		err = runEvents(ctx, args[1:], stdout, stderr)
	case "schedules":
		err = runSchedules(ctx, args[1:], stdout, stderr)
	case "mcp":
		err = runMCP(ctx, args[1:], os.Stdin, stdout, stderr)
	case "version":
		err = runVersion(args[1:], stdout)
	case "healthcheck":
		err = runHealthcheck(ctx, args[1:], stdout)
	case "help":
		// `server help` is `server -h`; `server help COMMAND` is `server COMMAND -h`.
		if len(args) == 1 || args[1] == "help" {
			return run(ctx, []string{"-h"}, stdout, stderr)
		}
		if !slices.Contains(commandNames, args[1]) {
			err = unknownCommand(args[1])
			break
		}
		return run(ctx, []string{args[1], "-h"}, stdout, stderr)
	default:
		if command != "" && !strings.HasPrefix(command, "-") {
			err = unknownCommand(command)
			break
		}
		err = runServe(ctx, args, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "server:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "server:", err)
		return 1
	}
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stdout)
	if f == nil || err != nil {
		return err
	}
	logger, err := f.common.logger()
	if err != nil {
		return err
	}
	// Every line logged with a request's context carries its request_id, and with a recording
	// span's context (tracing on) its trace_id and span_id.
	logger = slog.New(httpobs.NewLogHandler(telemetry.NewLogHandler(logger.Handler())))
	// Tracing, if the OTEL_* variables ask for it; its spans are flushed last, on the way out.
	shutdownTracing, err := telemetry.Setup(ctx, logger, "reckon-server")
	if errors.Is(err, telemetry.ErrConfig) {
		return fmt.Errorf("%w: %v", errUsage, err)
	} else if err != nil {
		return err
	}
	defer flushTracing(ctx, logger, shutdownTracing, f.drain)
	// The certificate and key are read before the database is opened: a missing or unreadable
	// one is exit status 1 naming it, at once. (cli.Serve reads them again to serve.)
	if _, err := f.tlsFiles.Config(); err != nil {
		return err
	}
	pool, migrator, err := cli.OpenDatabase(ctx, f.common.databaseURL, int(f.dbConns), f.common.schema, logger)
	if err != nil {
		return err
	}
	defer pool.Close()

	metrics := health.NewRegistry()
	logger.Info("confirmation holds of the effects the API enqueues", f.confirmation.LogAttrs()...)
	built, err := newEngine(pool, logger, metrics, &f.confirmation) // engine.go
	if err != nil {
		return err
	}
	client, sagas, sessions, stored := built.Effects, built.Sagas, built.Turns, built.Definitions
	defer client.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // never started; ends Wait's listener only
	// The event stream (GET /v1/events) is woken by the effects client's one LISTEN connection,
	// and its streams end when SIGTERM starts the shutdown: they never end by themselves, so they
	// would hold up the f.drain until -shutdown-timeout.
	operations := ops.New(pool, client, sagas, sessions) // the API's and the console's
	apiServer, err := api.New(&api.Config{
		Pool: pool, Effects: client, Sagas: sagas, Turns: sessions, Ops: operations, Logger: logger, MaxBodyBytes: f.maxBody,
		MaxBodyBytesInFlight: f.bodiesInFlight, IdempotencyTTL: f.idempotencyTTL,
		Events: events.New(pool, client), Stopping: ctx.Done(), RefreshConnectors: stored.Connectors, RefreshSagas: stored.Sagas,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	health.Register(mux, pool, migrator, metrics)
	apiServer.Register(mux)
	// The operators' console (/console, and / redirecting there) on the same clients.
	consoleServer, err := console.New(&console.Config{
		Ops: operations, Operators: operator.NewStore(pool), Logger: logger, SessionTTL: f.consoleTTL,
		SecureCookies: f.consoleSecureCookies,
	})
	if err != nil {
		return err
	}
	consoleServer.Register(mux)
	// The MCP gateway (/mcp): the tenant's connectors as tools, on the same clients (docs/mcp.md).
	gateway, err := mcpgw.New(&mcpgw.Config{
		Pool: pool, Effects: client, Ops: operations, RefreshConnectors: stored.Connectors, Wait: f.mcpWait,
		FourEyes: f.confirmation.FourEyes, Logger: logger, Stopping: ctx.Done(), MaxBodyBytes: f.maxBody,
	})
	if err != nil {
		return err
	}
	gateway.Register(mux)
	// On a database whose migrations are not current, only /healthz, /readyz and /metrics are
	// served (the API answers 503 schema_not_current) and the background work waits, until a
	// check every second finds them applied.
	schema := health.NewSchemaGate(migrator, logger)
	schema.Check(ctx)
	go schema.Watch(ctx, time.Second)
	go reloadDefinitions(ctx, schema, f.connectorSync, logger, stored, client)
	// Every request (API, console, health, metrics) gets an X-Request-Id and is counted by route.
	// Every request is a server span too, continuing the client's traceparent (tracing on).
	handler, err := httpobs.Handler(metrics, mux, schema.Guard(mux), nil)
	if err != nil {
		return err
	}
	logger.Info("server starting")
	if err := cli.Serve(ctx, logger, "http", *f.addr, handler, &cli.ServeOpts{Drain: f.drain, Timeouts: f.timeouts, TLS: f.tlsFiles}); err != nil {
		return err
	}
	logger.Info("server stopped")
	return nil
}

// reloadDefinitions waits for the schema to be current, then reloads the HTTP connectors and the
// saga definitions at once, then whenever one changes and every interval (-connector-sync-interval),
// until ctx ends, listening through client; a failed reload is logged and keeps what is loaded.
// (Expired Idempotency-Key responses are the reactors' retention's to delete; the API ignores them
// past -idempotency-ttl.)
func reloadDefinitions(ctx context.Context, schema *health.SchemaGate, interval time.Duration, logger *slog.Logger, stored *definitions.Loader, client *effects.Client) {
	select {
	case <-ctx.Done():
		return
	case <-schema.Current():
	}
	if err := stored.Load(ctx); err != nil && ctx.Err() == nil {
		logger.WarnContext(ctx, "stored definitions: load failed; keeping the ones loaded", slog.String("error", err.Error()))
	}
	stored.Run(ctx, interval, client)
}

// serveFlags are the flags of `server` (serving the API, the console, health and metrics).
type serveFlags struct {
	common                                           commonFlags
	addr                                             *string
	drain, idempotencyTTL, connectorSync, consoleTTL time.Duration
	// mcpWait: how long an MCP tools/call waits for its effect to settle (mcpgw.Config.Wait).
	mcpWait                          time.Duration
	dbConns, maxBody, bodiesInFlight int64
	consoleSecureCookies             bool
	timeouts                         cli.Timeouts
	tlsFiles                         cli.TLSFiles
	// confirmation: the confirmation holds of the effects the API enqueues (docs/design.md,
	// "Confirmation holds").
	confirmation cli.ConfirmationFlags
}

// parseServeFlags parses and checks the flags of `server`; nil flags and a nil error after
// -version printed the version.
func parseServeFlags(args []string, stdout io.Writer) (*serveFlags, error) {
	fs := newFlagSet("server", serverUsage, stdout)
	f := &serveFlags{}
	f.common.register(fs)
	f.addr = fs.String("addr", cli.Env("RECKON_SERVER_ADDR", "127.0.0.1:8080"), "address to listen on (env RECKON_SERVER_ADDR)")
	env := cli.EnvFlags{FlagSet: fs}
	env.DurationVar(&f.drain, "shutdown-timeout", "RECKON_SHUTDOWN_TIMEOUT", 10*time.Second,
		"how long requests in flight may take to finish after SIGTERM; those still running then are cancelled")
	env.Int64Var(&f.dbConns, "db-conns", "RECKON_DB_CONNS", 20,
		"database connections; at most half of them serve API requests at once, the rest keep health checks and reloads going")
	env.Int64Var(&f.maxBody, "max-body-bytes", "RECKON_MAX_BODY_BYTES", api.DefaultMaxBodyBytes, "largest request body accepted")
	env.Int64Var(&f.bodiesInFlight, "max-body-bytes-in-flight", "RECKON_MAX_BODY_BYTES_IN_FLIGHT", 0,
		"request body bytes held at once; more requests wait for their share (default 4 x -max-body-bytes)")
	env.DurationVar(&f.idempotencyTTL, "idempotency-ttl", "RECKON_IDEMPOTENCY_TTL", 24*time.Hour, "how long a response stored for an Idempotency-Key is replayed")
	env.DurationVar(&f.consoleTTL, "console-session-ttl", "RECKON_CONSOLE_SESSION_TTL", console.DefaultSessionTTL,
		"how long a console sign-in lasts (1m to 720h)")
	env.DurationVar(&f.connectorSync, "connector-sync-interval", "RECKON_CONNECTOR_SYNC_INTERVAL", 10*time.Second,
		"how often the HTTP connectors and saga definitions are reloaded from the database; a request naming an unknown one reloads them at once")
	env.BoolVar(&f.consoleSecureCookies, "console-secure-cookies", "RECKON_CONSOLE_SECURE_COOKIES", false,
		"mark the console's cookies Secure over plain HTTP too, for a server behind a proxy that terminates TLS")
	env.DurationVar(&f.mcpWait, "mcp-wait", "RECKON_MCP_WAIT", mcpgw.DefaultWait,
		"how long an MCP tools/call waits for its effect to settle before answering that the outcome is being checked (1s to 10m)")
	f.timeouts.Flags(&env)
	f.tlsFiles.Flags(&env)
	f.confirmation.Register(&env)
	showVersion := fs.Bool("version", false, "print the version, as server version does, and exit")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if *showVersion {
		return nil, version.Print(stdout, "server", "text")
	}
	if fs.NArg() > 0 {
		return nil, serveArgsError(fs)
	}
	if err := env.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case f.maxBody < 1 || f.idempotencyTTL <= 0 || f.connectorSync <= 0:
		return nil, fmt.Errorf("%w: -max-body-bytes, -idempotency-ttl and -connector-sync-interval must be positive", errUsage)
	case f.consoleTTL < time.Minute || f.consoleTTL > 720*time.Hour:
		return nil, fmt.Errorf("%w: -console-session-ttl must be between 1m and 720h, got %s", errUsage, f.consoleTTL)
	case f.mcpWait < time.Second || f.mcpWait > mcpgw.MaxWait:
		return nil, fmt.Errorf("%w: -mcp-wait must be between 1s and %s, got %s", errUsage, mcpgw.MaxWait, f.mcpWait)
	case f.drain <= 0:
		return nil, fmt.Errorf("%w: -shutdown-timeout must be positive, got %s", errUsage, f.drain)
	case f.bodiesInFlight != 0 && f.bodiesInFlight < f.maxBody:
		return nil, fmt.Errorf("%w: -max-body-bytes-in-flight must be at least -max-body-bytes (%d), got %d", errUsage, f.maxBody, f.bodiesInFlight)
	case f.dbConns < 2 || f.dbConns > 10000:
		return nil, fmt.Errorf("%w: -db-conns must be between 2 and 10000, got %d", errUsage, f.dbConns)
	}
	if err := errors.Join(f.timeouts.Validate(), f.tlsFiles.Validate(), f.confirmation.Validate()); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return f, nil
}

// flushTracing sends the spans not exported yet, within timeout (-shutdown-timeout); a failure is
// logged, not the process's.
func flushTracing(ctx context.Context, logger *slog.Logger, shutdown func(context.Context) error, timeout time.Duration) {
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := shutdown(flushCtx); err != nil {
		logger.Warn("tracing: spans not flushed at shutdown", slog.String("error", err.Error()))
	}
}

// runVersion prints what this binary was built from (package version), without a database.
func runVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("server version", "usage: server version [-o json]   the version, commit and Go version this binary was built from\n\nflags:", stdout)
	output := fs.String("o", "text", "output: text (one line) or json")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("%w: -o %q: want text or json", errUsage, *output)
	}
	return version.Print(stdout, "server", *output)
}

// migrateUsage is the synopsis of `server migrate`.
const migrateUsage = `server migrate up [-create-db] [-citus]  apply pending migrations (River's, then Reckon's); -citus: docs/deploy.md
server migrate down [-steps N | -all]    roll back Reckon's newest migration(s); -all removes River's too
server migrate status                    list migrations and whether they are applied`

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server migrate", migrateUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	var (
		createDB *bool
		citus    *bool
		steps    *int
		all      *bool
	)
	switch cmd.action {
	case "up":
		createDB = fs.Bool("create-db", false, "create the database first if it does not exist")
		citus = fs.Bool("citus", false, "make -schema a Citus cell: River's tables in SCHEMA_river on the coordinator, the schema distributed (docs/deploy.md)")
	case "down":
		steps = fs.Int("steps", 1, "how many of Reckon's migrations to roll back")
		all = fs.Bool("all", false, "roll back every migration, River's included")
	case "status":
	default:
		return cmd.unknownAction("migrate direction")
	}
	if err := parse(fs, cmd.args); err != nil {
		return err
	}
	if steps != nil && *steps < 1 {
		return fmt.Errorf("%w: -steps must be at least 1, got %d", errUsage, *steps)
	}
	if citus != nil && *citus && cmd.common.schema == "public" {
		return fmt.Errorf("%w: -citus needs a schema of its own for the cell: -schema NAME (or RECKON_SCHEMA)", errUsage)
	}
	logger, err := cmd.common.logger()
	if err != nil {
		return err
	}
	if createDB != nil && *createDB {
		created, err := db.EnsureDatabase(ctx, cmd.common.databaseURL)
		if err != nil {
			return err
		}
		if created {
			logger.Info("created database")
		}
	}
	pool, migrator, err := cli.OpenDatabase(ctx, cmd.common.databaseURL, 0, cmd.common.schema, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	if citus != nil && *citus {
		if migrator, err = db.NewMigrator(pool, &db.MigratorConfig{Logger: logger, Schema: cmd.common.schema, Citus: true}); err != nil {
			return err
		}
	}
	switch cmd.action {
	case "up":
		result, err := migrator.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "applied %d River and %d Reckon migrations\n", len(result.River), len(result.Reckon))
	case "down":
		result, err := migrator.Down(ctx, &db.DownOpts{Steps: *steps, All: *all})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rolled back %d Reckon and %d River migrations\n", len(result.Reckon), len(result.River))
	case "status":
		status, err := migrator.Status(ctx)
		if err != nil {
			return err
		}
		printStatus(stdout, status)
	}
	return nil
}

func printStatus(w io.Writer, status *db.Status) {
	tw := newTable(w, "VERSION\tNAME\tSTATUS\tAPPLIED AT")
	for _, m := range status.Applied {
		fmt.Fprintf(tw, "%04d\t%s\tapplied\t%s\n", m.Version, m.Name, m.AppliedAt.UTC().Format(time.RFC3339))
	}
	for _, m := range status.Pending {
		fmt.Fprintf(tw, "%04d\t%s\tpending\t-\n", m.Version, m.Name)
	}
	for _, v := range status.Unknown {
		fmt.Fprintf(tw, "%04d\t?\tapplied by a newer binary\t-\n", v)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "river: %d applied, %d pending\n", status.RiverApplied, status.RiverPending)
	if status.Current() {
		fmt.Fprintln(w, "schema is current")
	} else {
		fmt.Fprintln(w, "schema is NOT current: run `server migrate up`")
	}
}
