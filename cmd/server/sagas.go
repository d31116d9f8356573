package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// sagasUsage is the synopsis of `server sagas`.
const sagasUsage = `server sagas define -f definition.json [-skip-connector-check]   (or -f - for stdin; docs/api.md)
server sagas list [-json]`

// newSagaClient is the server's saga client: on the effects client that enqueues (never started
// here), with the stored definitions loaded by syncSagas (at once when the schema is current, then
// every interval) and whenever a request names one it has not loaded.
func newSagaClient(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (*saga.Client, error) {
	sagas, err := saga.NewClient(pool, &saga.Config{Logger: logger, OnUnknownDefinition: sagadef.Load})
	if err != nil {
		return nil, err
	}
	return sagas, nil
}

// syncSagas loads the saga definitions not loaded yet.
func syncSagas(ctx context.Context, logger *slog.Logger, pool *pgxpool.Pool, sagas *saga.Client) {
	result, err := sagadef.Sync(ctx, pool, sagas)
	if err != nil && ctx.Err() == nil {
		logger.Warn("sync saga definitions", slog.Any("error", err))
	}
	if len(result.Added) > 0 {
		logger.Info("saga definitions loaded", slog.Any("added", result.Added))
	}
	for name, err := range result.Skipped {
		logger.Warn("saga definition skipped", slog.String("definition", name), slog.Any("error", err))
	}
}

// runSagas manages the saga definitions stored in reckon_saga_definitions (package
// saga/sagadef): define (validated; definitions never change) and list.
func runSagas(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server sagas", sagasUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	var run func(context.Context, *pgxpool.Pool) error
	switch cmd.action {
	case "define":
		file := fs.String("f", "", "read the definition as JSON from this file (- for stdin) (required)")
		skipCheck := fs.Bool("skip-connector-check", false, "do not check that the connectors are stored HTTP connectors (for Go connectors of your own reactors)")
		run = func(ctx context.Context, pool *pgxpool.Pool) error {
			if *file == "" {
				return fmt.Errorf("%w: -f is required", errUsage)
			}
			raw, err := readFile(*file, stdin)
			if err != nil {
				return err
			}
			def, err := sagadef.Parse(raw)
			if err != nil {
				return err
			}
			var registry *effects.Registry
			if !*skipCheck {
				registry = effects.NewRegistry()
				if _, err := httpconn.Sync(ctx, pool, registry); err != nil {
					return err
				}
			}
			var stored sagadef.Definition
			var created bool
			err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
				if stored, created, err = sagadef.Put(ctx, tx, def, registry); err != nil || !created {
					return err // an identical definition stored again changes nothing
				}
				return api.RecordChange(ctx, tx, api.ChangeSagaDefinition, stored.Name, api.ChangeCreate, cliActor(), stored)
			})
			if err != nil {
				return err
			}
			verb := "unchanged (already stored)"
			if created {
				verb = "stored"
			}
			fmt.Fprintf(stdout, "saga definition %s (%d steps) %s\n", stored.Name, len(stored.Steps), verb)
			return nil
		}
	case "list":
		asJSON := fs.Bool("json", false, "print a JSON array of definitions")
		run = func(ctx context.Context, pool *pgxpool.Pool) error {
			defs, err := sagadef.List(ctx, pool)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, defs)
			}
			w := newTable(stdout, "NAME\tSTEPS\tCREATED")
			for _, d := range defs {
				steps := make([]string, len(d.Steps))
				for i, s := range d.Steps {
					steps[i] = s.Name + "(" + s.Connector + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", d.Name, strings.Join(steps, " → "), d.CreatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		}
	default:
		return cmd.unknownAction("sagas action")
	}
	return cmd.run(ctx, sagadef.ErrInvalid, run)
}

func readFile(file string, stdin io.Reader) ([]byte, error) {
	var (
		raw []byte
		err error
	)
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", errUsage, file, err)
	}
	return raw, nil
}
