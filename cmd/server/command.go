package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/cmd/internal/health"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// commonFlags are the flags of serve and of every command.
type commonFlags struct {
	databaseURL string
	schema      string
	logFormat   string
	logLevel    string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.databaseURL, "database-url", cli.Env("DATABASE_URL", cli.DefaultDatabaseURL), "Postgres connection string (env DATABASE_URL)")
	fs.StringVar(&c.schema, "schema", cli.Env("RECKON_SCHEMA", "public"), cli.SchemaFlagUsage)
	fs.StringVar(&c.logFormat, "log-format", cli.Env("RECKON_LOG_FORMAT", "text"), "log format: text or json (env RECKON_LOG_FORMAT)")
	fs.StringVar(&c.logLevel, "log-level", cli.Env("RECKON_LOG_LEVEL", cli.DefaultLogLevel), "least severe records logged: debug, info, warn or error (env RECKON_LOG_LEVEL)")
}

// logger is the logger -log-format and -log-level ask for; an unknown format or level, or an
// invalid -schema (checked here too, since every command asks for its logger first), is a usage
// mistake.
func (c *commonFlags) logger() (*slog.Logger, error) {
	if err := c.checkSchema(); err != nil {
		return nil, err
	}
	logger, err := cli.NewLogger(c.logFormat, c.logLevel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return logger, nil
}

// checkSchema refuses an invalid -schema: a usage mistake.
func (c *commonFlags) checkSchema() error {
	if err := cli.CheckSchema(c.schema); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// withPool opens a pool of -database-url in -schema (maxConns as for postgres.OpenPool), checks
// that the database has every migration this binary knows (else an error saying to run `server
// migrate up`), calls fn with it and closes it.
func (c *commonFlags) withPool(ctx context.Context, maxConns int, fn func(context.Context, *pgxpool.Pool) error) error {
	if err := c.checkSchema(); err != nil {
		return err
	}
	pool, migrator, err := cli.OpenDatabase(ctx, c.databaseURL, maxConns, c.schema, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	status, err := migrator.Status(ctx)
	if err != nil {
		return err
	}
	if !status.Current() {
		return fmt.Errorf("the database is not migrated for this binary (pending: %s): run `server migrate up` first",
			strings.Join(health.PendingMigrations(status), ", "))
	}
	return fn(ctx, pool)
}

// command is one `server COMMAND ACTION …` invocation: its action, the arguments after it, and a
// flag set named for both with the common flags registered, for the action to add its own.
type command struct {
	usage  string // the command's synopsis
	action string
	args   []string
	fs     *flag.FlagSet
	common commonFlags
}

// newCommand splits args into the action and its arguments (splitAction: no action, or a request
// for help, ends the command here).
func newCommand(name, usage string, args []string, stdout io.Writer) (*command, error) {
	action, args, err := splitAction(name, usage, args, stdout)
	if err != nil {
		return nil, err
	}
	c := &command{usage: usage, action: action, args: args, fs: newFlagSet(name+" "+action, "", stdout)}
	c.common.register(c.fs)
	return c, nil
}

// run parses the action's flags (no positional arguments), checks -log-format, and calls fn with
// a pool of -database-url. An error fn returns that wraps invalid (what the command refused as
// invalid input) is a usage mistake: exit status 2.
func (c *command) run(ctx context.Context, invalid error, fn func(context.Context, *pgxpool.Pool) error) error {
	if err := parse(c.fs, c.args); err != nil {
		return err
	}
	return c.runParsed(ctx, invalid, fn)
}

// runParsed is run for an action that has parsed and checked its flags itself. invalid may be nil
// (nothing fn returns is a usage mistake but what it wraps in errUsage itself).
func (c *command) runParsed(ctx context.Context, invalid error, fn func(context.Context, *pgxpool.Pool) error) error {
	if _, err := c.common.logger(); err != nil {
		return err
	}
	err := c.common.withPool(ctx, 0, fn)
	if invalid != nil && errors.Is(err, invalid) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}

// newTable is a table printed to w with the tab-separated header; Flush prints it.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}

// statusColumn is a table's STATUS: current while ended is nil, else what ended it and when.
func statusColumn(current, ended string, at *time.Time) string {
	if at == nil {
		return current
	}
	return ended + " " + at.UTC().Format(time.RFC3339)
}

// printJSON prints v to w as indented JSON (the -json form of a list).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// unknownAction is the usage mistake of an action the command does not have.
func (c *command) unknownAction(noun string) error {
	return fmt.Errorf("%w: unknown %s %q; want one of:\n%s", errUsage, noun, c.action, c.usage)
}

// outputFlag registers -o, the output of an operator command: table (default) or json. Check it
// with checkOutput after parsing.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "table", "output: table or json")
}

// checkOutput refuses an -o other than table or json (exit status 2).
func checkOutput(output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("%w: -o %q: want table or json", errUsage, output)
	}
	return nil
}

// actorFlag registers -actor, who takes an operator action, for the audit trail: cliActor() (the
// OS user) unless given.
func actorFlag(fs *flag.FlagSet) *string {
	return fs.String("actor", cliActor(), "who acts, for the audit trail")
}

// withOps calls fn with the operators' reads and actions (package ops) on pool, built as the
// server builds its clients (never started here): the stored HTTP connectors registered, saga
// definitions loaded when a saga names one. The CLI sees every tenant (ops.Scope{}). An
// *ops.FieldError fn returns is a usage mistake naming the flag (opsError).
func (c *command) withOps(ctx context.Context, pool *pgxpool.Pool, fn func(*ops.Ops) error) error {
	logger, err := c.common.logger()
	if err != nil {
		return err
	}
	built, err := newEngine(pool, logger, nil, nil)
	if err != nil {
		return err
	}
	// Synced once, quietly (the CLI does not log what it loads), by a Syncer of its own: the
	// engine's Loader never runs here.
	if _, err := new(httpconn.Syncer).Sync(ctx, pool, built.Effects.Registry()); err != nil {
		return err
	}
	client := built.Effects
	defer client.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // never started; ends Wait's listener only
	return c.opsError(fn(ops.New(pool, client, built.Sagas, built.Turns)))
}

// opsError makes an *ops.FieldError a usage mistake (exit status 2) naming the command's flag for
// the field (ops's names use '_' where flags use '-': idempotency_key is -idempotency-key), or the
// field itself when the command has no such flag (the run ID of `runs show`).
func (c *command) opsError(err error) error {
	var fe *ops.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	name := strings.ReplaceAll(fe.Field, "_", "-")
	if c.fs.Lookup(name) != nil {
		name = "-" + name
	}
	return fmt.Errorf("%w: %s: %s", errUsage, name, jsonx.SafeText(fe.Message))
}
