package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/schedule"
)

// schedulesUsage is the synopsis of `server schedules`.
const schedulesUsage = `server schedules list [-tenant T] [-o table|json]   the schedules, by tenant and name
server schedules set -tenant T NAME -connector C (-cron EXPR | -every D) [-args JSON]
                     [-missed skip|catch_up] [-disabled] [-o table|json]
                                        create or replace a schedule: its effects are enqueued once per tick
server schedules delete -tenant T NAME  no tick of it is enqueued after`

// runSchedules lists, sets and deletes schedules (package schedule) of any tenant, through package
// ops: the checks and errors of the HTTP API.
func runSchedules(ctx context.Context, args []string, stdout, _ io.Writer) error {
	cmd, err := newCommand("server schedules", schedulesUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	var def schedule.Definition
	var argsJSON, missed string
	var output *string
	switch cmd.action {
	case "list":
		output = outputFlag(fs)
	case "set":
		output = outputFlag(fs)
		fs.StringVar(&def.Connector, "connector", "", "the connector of the effects (required)")
		fs.StringVar(&def.Cron, "cron", "", "a 5-field cron expression or a descriptor such as @hourly, UTC unless prefixed CRON_TZ=<zone>")
		fs.DurationVar(&def.Interval, "every", 0, "an interval instead of -cron: ticks at each multiple of it since the Unix epoch (whole seconds, at least 1s)")
		fs.StringVar(&argsJSON, "args", "{}", "the effects' args, a JSON document")
		fs.StringVar(&missed, "missed", "skip", "the ticks missed while no reactor ran: skip (enqueue the latest only) or catch_up (each, bounded)")
		fs.BoolVar(&def.Disabled, "disabled", false, "store it disabled: no tick is enqueued until it is set again without -disabled")
	case "delete":
	default:
		return cmd.unknownAction("schedules action")
	}
	fs.StringVar(&def.Tenant, "tenant", "", "the schedules' tenant (required but for list)")
	name, err := parseWithID(fs, cmd.args, cmd.action != "list")
	if err != nil {
		return err
	}
	def.Name, def.Missed, def.Args = name, schedule.Missed(missed), json.RawMessage(argsJSON)
	if output != nil {
		if err := checkOutput(*output); err != nil {
			return err
		}
	}
	if def.Tenant == "" && cmd.action != "list" {
		return fmt.Errorf("%w: -tenant is required: schedules are per tenant", errUsage)
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		return cmd.withOps(ctx, pool, func(o *ops.Ops) error {
			switch cmd.action {
			case "list":
				return listSchedules(ctx, o, def.Tenant, *output, stdout)
			case "set":
				s, created, err := o.PutSchedule(ctx, ops.Scope{}, def, "cli:"+cliActor())
				if err != nil {
					return scheduleCLIError(err, def)
				}
				if *output == "json" {
					return printJSON(stdout, s)
				}
				verb := "replaced"
				if created {
					verb = "created"
				}
				fmt.Fprintf(stdout, "schedule %s/%s %s: %s, next tick %s\n", s.Tenant, s.Name, verb, s.Spec(), s.NextTick.UTC().Format(time.RFC3339))
				return nil
			default:
				if err := o.DeleteSchedule(ctx, ops.Scope{}, def.Tenant, def.Name); err != nil {
					return scheduleCLIError(err, def)
				}
				fmt.Fprintf(stdout, "schedule %s/%s deleted\n", def.Tenant, def.Name)
				return nil
			}
		})
	})
}

// scheduleCLIError names a schedule missing, and a bad field by its flag (NAME for the name,
// -every for the interval).
func scheduleCLIError(err error, def schedule.Definition) error {
	if errors.Is(err, ops.ErrNotFound) {
		return fmt.Errorf("tenant %s has no schedule %s", jsonx.SafeText(def.Tenant), jsonx.SafeText(def.Name))
	}
	return fieldUsageError(err, map[string]string{"name": "NAME", "interval_seconds": "-every"})
}

// listSchedules prints every schedule (of tenant, if given), page after page.
func listSchedules(ctx context.Context, o *ops.Ops, tenant, output string, w io.Writer) error {
	all := []*schedule.Schedule{}
	for after := ""; ; {
		page, next, err := o.Schedules(ctx, ops.Scope{}, tenant, ops.MaxLimit, after)
		if err != nil {
			return err
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	if output == "json" {
		return printJSON(w, all)
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "no schedules")
		return nil
	}
	tw := newTable(w, "TENANT\tNAME\tCONNECTOR\tSPEC\tMISSED\tENABLED\tNEXT TICK\tLAST EFFECT\tLAST ERROR")
	for _, s := range all {
		last := "-"
		if s.LastEffectID != nil {
			last = s.LastEffectID.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\n", s.Tenant, s.Name, s.Connector, s.Spec(), s.Missed,
			!s.Disabled, s.NextTick.UTC().Format(time.RFC3339), last, orDash(s.LastError))
	}
	return tw.Flush()
}
