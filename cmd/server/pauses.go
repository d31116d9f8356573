package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// connectorsPause is `server connectors pause|resume NAME [-tenant T] -reason R` and `server
// connectors pauses [-o table|json]`: operators' pauses of connectors, through ops.Ops (the API's
// and the console's path: the same checks and errors).
func connectorsPause(ctx context.Context, cmd *command, stdout io.Writer) error {
	fs := cmd.fs
	var output *string
	var tenant, reason string
	if cmd.action == "pauses" {
		output = outputFlag(fs)
	} else {
		fs.StringVar(&tenant, "tenant", "", "only this tenant's effects (default: every tenant's)")
		fs.StringVar(&reason, "reason", "", "why, recorded with the pause and in its log (required, at most 2000 bytes)")
	}
	name, err := parseWithArg(fs, cmd.args)
	if err != nil {
		return err
	}
	switch {
	case cmd.action == "pauses" && name != "":
		return fmt.Errorf("%w: %s takes no NAME", errUsage, fs.Name())
	case cmd.action == "pauses":
		if err := checkOutput(*output); err != nil {
			return err
		}
	case name == "":
		return fmt.Errorf("%w: %s needs a connector NAME", errUsage, fs.Name())
	default:
		if err := pauseUsageError(ops.CheckPause(name, tenant, reason)); err != nil { // before the database is opened
			return err
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		return cmd.withOps(ctx, pool, func(o *ops.Ops) error {
			switch cmd.action {
			case "pauses":
				return showPauses(ctx, o, *output, stdout)
			case "pause":
				pause, created, err := o.PauseConnector(ctx, ops.Scope{}, name, tenant, cliActor(), reason)
				if err != nil {
					return pauseUsageError(pauseNotFound(err, name))
				}
				if !created {
					fmt.Fprintf(stdout, "connector %s was paused already %s by %s since %s: %s\n", name, pauseWhose(tenant),
						pause.PausedBy, pause.PausedAt.UTC().Format(time.RFC3339), pause.Reason)
					return nil
				}
				fmt.Fprintf(stdout, "connector %s paused %s: no reactor starts its calls until it is resumed\n", name, pauseWhose(tenant))
			case "resume":
				resumed, err := o.ResumeConnector(ctx, ops.Scope{}, name, tenant, cliActor(), reason)
				if err != nil {
					return pauseUsageError(pauseNotFound(err, name))
				}
				if !resumed {
					return fmt.Errorf("connector %s is not paused %s", jsonx.SafeText(name), pauseWhose(tenant))
				}
				fmt.Fprintf(stdout, "connector %s resumed %s: its effects go out now\n", name, pauseWhose(tenant))
			}
			return nil
		})
	})
}

// pauseWhose says whose effects a pause holds: "for every tenant" or "for tenant T".
func pauseWhose(tenant string) string {
	if tenant == "" {
		return "for every tenant"
	}
	return "for tenant " + jsonx.SafeText(tenant)
}

// pauseNotFound names the connector ops.ErrNotFound is about.
func pauseNotFound(err error, name string) error {
	if errors.Is(err, ops.ErrNotFound) {
		return fmt.Errorf("no connector %s: the server knows it neither as stored, limited, paused nor from an effect of the last hour", jsonx.SafeText(name))
	}
	return err
}

// pauseUsageError makes an *ops.FieldError a usage mistake (exit status 2) naming the flag of its
// field, or NAME.
func pauseUsageError(err error) error {
	return fieldUsageError(err, map[string]string{"name": "NAME", "tenant_id": "-tenant"})
}

// showPauses prints every operator's pause.
func showPauses(ctx context.Context, o *ops.Ops, output string, w io.Writer) error {
	pauses, err := o.ConnectorPauses(ctx, ops.Scope{})
	if err != nil {
		return err
	}
	if output == "json" {
		return printJSON(w, map[string]any{"pauses": pauses})
	}
	if len(pauses) == 0 {
		fmt.Fprintln(w, "no connector is paused")
		return nil
	}
	tw := newTable(w, "CONNECTOR\tTENANT\tPAUSED BY\tSINCE\tREASON")
	for _, p := range pauses {
		tenant := p.TenantID
		if tenant == "" {
			tenant = "(every tenant)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Connector, tenant, p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339), p.Reason)
	}
	return tw.Flush()
}
