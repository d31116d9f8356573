package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/cmd/server/internal/mcpgw"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
)

// mcpUsage is the synopsis of `server mcp`.
const mcpUsage = `usage: server mcp -token T [-wait D] [-console-url U]   an MCP server over stdin and stdout

The tenant of the API token T's connectors are its tools, and every tool call is an effect, as
through /mcp on a running server (docs/mcp.md). For MCP clients that start their servers as local
processes; the log goes to stderr. It enqueues and waits: a reactor must run on the same database.

flags:`

// runMCP serves one MCP session over stdin and stdout for the tenant of -token until stdin closes
// or the process is stopped.
func runMCP(ctx context.Context, args []string, stdin io.ReadCloser, stdout, stderr io.Writer) error {
	fs := newFlagSet("server mcp", mcpUsage, stdout)
	var common commonFlags
	common.register(fs)
	env := cli.EnvFlags{FlagSet: fs}
	var wait time.Duration
	token := fs.String("token", os.Getenv("RECKON_MCP_TOKEN"), "a tenant's API token (env RECKON_MCP_TOKEN): its tenant's connectors are the tools")
	consoleURL := fs.String("console-url", os.Getenv("RECKON_CONSOLE_URL"), "the console's URL for the evidence links of answers, e.g. https://reckon.example.com/console (env RECKON_CONSOLE_URL)")
	env.DurationVar(&wait, "wait", "RECKON_MCP_WAIT", mcpgw.DefaultWait,
		"how long a tools/call waits for its effect to settle before answering that the outcome is being checked (1s to 10m)")
	var confirmation cli.ConfirmationFlags
	confirmation.Register(&env)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(env.Err(), confirmation.Validate()); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case strings.TrimSpace(*token) == "":
		return fmt.Errorf("%w: -token is required: a tenant's API token (server tokens create -tenant T)", errUsage)
	case wait < time.Second || wait > mcpgw.MaxWait:
		return fmt.Errorf("%w: -wait must be between 1s and %s, got %s", errUsage, mcpgw.MaxWait, wait)
	}
	logger, err := common.logger()
	if err != nil {
		return err
	}
	return common.withPool(ctx, 4, func(ctx context.Context, pool *pgxpool.Pool) error {
		authenticated, err := tenants.Authenticate(ctx, pool, strings.TrimSpace(*token))
		if errors.Is(err, tenants.ErrInvalidToken) {
			return fmt.Errorf("%w: -token: invalid or revoked token", errUsage)
		} else if err != nil {
			return err
		}
		if authenticated.System {
			return fmt.Errorf("%w: -token: a system token has no tools; use a tenant's token", errUsage)
		}
		built, err := newEngine(pool, logger, nil, &confirmation)
		if err != nil {
			return err
		}
		defer built.Effects.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // never started; ends Wait's listener only
		gateway, err := mcpgw.New(&mcpgw.Config{
			Pool: pool, Effects: built.Effects, Ops: ops.New(pool, built.Effects, built.Sagas, built.Turns), RefreshConnectors: built.Definitions.Connectors, Wait: wait,
			FourEyes: confirmation.FourEyes, ConsoleURL: *consoleURL, Logger: logger,
		})
		if err != nil {
			return err
		}
		logger.Info("mcp: serving on stdin and stdout", "tenant", authenticated.TenantID)
		return gateway.ServeStdio(ctx, authenticated, stdin, nopCloser{stdout})
	})
}

// nopCloser is a writer that closing leaves open: the process's stdout.
type nopCloser struct{ io.Writer }

// Close does nothing.
func (nopCloser) Close() error { return nil }
