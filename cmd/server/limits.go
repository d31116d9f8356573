package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// limitUsage is the synopsis of `server connectors limit`.
const limitUsage = `server connectors limit show [NAME] [-o table|json]
                                        the operators' limits and the state of their keys (one connector's with NAME)
server connectors limit set NAME [-rate N] [-per 1s] [-burst N] [-max-in-flight N] [-per-tenant]
                                 [-break-after N] [-break-for 30s] [-reason R]
                                        replace the connector's own limit in every reactor, without a restart
server connectors limit clear NAME      the connector's own limit applies again
server connectors limit reset NAME      close its circuits and end its pauses: the upstream is back`

// connectorsLimit is `server connectors limit show|set|clear|reset`: operators' limits of
// connectors, through the API's path (ops.Ops.SetLimitByName and the rest, the JSON of package
// api), so that the checks, errors and JSON are the API's.
func connectorsLimit(ctx context.Context, args []string, stdout io.Writer) error {
	cmd, err := newCommand("server connectors limit", limitUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	var output *string
	var limit effects.Limit
	var reason string
	switch cmd.action {
	case "show":
		output = outputFlag(fs)
	case "set":
		fs.IntVar(&limit.Rate, "rate", 0, "calls that may start per -per; 0: no rate limit (at most 1000000)")
		fs.DurationVar(&limit.Per, "per", 0, "the interval of -rate (default 1s; 1ms to 1h)")
		fs.IntVar(&limit.Burst, "burst", 0, "calls that may start at once after a quiet spell (default -rate)")
		fs.IntVar(&limit.MaxInFlight, "max-in-flight", 0, "calls in flight at once; 0: no cap (at most 1000000)")
		fs.BoolVar(&limit.PerTenant, "per-tenant", false, "a budget, circuit and pauses of its own for every tenant instead of one shared")
		fs.IntVar(&limit.BreakAfter, "break-after", 0, "consecutive failures that open the circuit; 0: no circuit breaker (at most 1000000)")
		fs.DurationVar(&limit.BreakFor, "break-for", 0, "how long an open circuit stays open before a probe call (default 30s; 1s to 1h)")
		fs.StringVar(&reason, "reason", "", "why, stored with the limit (at most 2000 bytes)")
	case "clear", "reset":
	default:
		return cmd.unknownAction("connectors limit action")
	}
	// NAME, then flags; show takes no NAME to list every connector.
	name, err := parseWithArg(fs, cmd.args)
	if err != nil {
		return err
	}
	if name == "" && cmd.action != "show" {
		return fmt.Errorf("%w: %s needs a connector NAME", errUsage, fs.Name())
	}
	if output != nil {
		if err := checkOutput(*output); err != nil {
			return err
		}
	}
	// The API's checks, before the database is opened.
	if name != "" {
		if err := limitUsageError(ops.CheckLimitName(name)); err != nil {
			return err
		}
	}
	if cmd.action == "set" {
		if limit, err = ops.CheckLimit(name, limit, reason); err != nil {
			return limitUsageError(err)
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		return cmd.withOps(ctx, pool, func(o *ops.Ops) error {
			switch cmd.action {
			case "show":
				return showLimits(ctx, o, name, *output, stdout)
			case "set":
				if _, err := o.SetLimitByName(ctx, name, limit, cliActor(), reason); err != nil {
					return limitUsageError(err)
				}
				fmt.Fprintf(stdout, "connector %s limited: %v; every reactor applies it within seconds\n", name, limit)
			case "clear":
				cleared, err := o.ClearLimitByName(ctx, name)
				if err != nil {
					return limitUsageError(err)
				}
				if !cleared {
					return fmt.Errorf("no operator's limit for connector %s", jsonx.SafeText(name))
				}
				fmt.Fprintf(stdout, "connector %s: operator's limit cleared; its own applies again\n", name)
			case "reset":
				changed, err := o.ResetLimitByName(ctx, name)
				if err != nil {
					return limitUsageError(err)
				}
				if !changed {
					fmt.Fprintf(stdout, "connector %s: nothing was paused, open or counting failures\n", name)
					return nil
				}
				fmt.Fprintf(stdout, "connector %s: circuits closed and pauses ended\n", name)
			}
			return nil
		})
	})
}

// limitUsageError makes an *ops.FieldError a usage mistake (exit status 2) naming the flag of its
// field, or NAME.
func limitUsageError(err error) error {
	return fieldUsageError(err, map[string]string{"name": "NAME", "per_ms": "-per", "break_for_ms": "-break-for", "": "limit"})
}

// fieldUsageError makes an *ops.FieldError a usage mistake (exit status 2) naming the flag of its
// field (flagOf); any other error is returned as it is.
func fieldUsageError(err error, flags map[string]string) error {
	var bad *ops.FieldError
	if !errors.As(err, &bad) {
		return err
	}
	return fmt.Errorf("%w: %s: %s", errUsage, flagOf(bad.Field, flags), jsonx.SafeText(bad.Message))
}

// flagOf names a field of a request (the API's name for it) as the CLI does: as flags names it,
// else as the flag of the field's name with dashes for underscores.
func flagOf(field string, flags map[string]string) string {
	if flag, ok := flags[field]; ok {
		return flag
	}
	return "-" + strings.ReplaceAll(field, "_", "-")
}

// showLimits prints the operators' limits and the state of their keys (every key, the CLI seeing
// every tenant), or one connector's.
func showLimits(ctx context.Context, o *ops.Ops, name, output string, w io.Writer) error {
	var limits []api.LimitJSON
	var states []api.LimitStateJSON
	if name == "" {
		settings, keys, err := o.Limits(ctx, ops.Scope{})
		if err != nil {
			return err
		}
		all := api.LimitsToJSON(settings, keys)
		if output == "json" {
			return printJSON(w, all)
		}
		limits, states = all.Limits, all.States
		if len(limits) == 0 {
			fmt.Fprintln(w, "no operator's limits: every connector has its own")
		}
	} else {
		setting, keys, err := o.ConnectorLimit(ctx, ops.Scope{}, name)
		if err != nil {
			return limitUsageError(err)
		}
		one := api.ConnectorLimitToJSON(setting, keys)
		if output == "json" {
			return printJSON(w, one)
		}
		if one.Limit == nil {
			fmt.Fprintf(w, "connector %s has no operator's limit: its own applies\n", name)
		} else {
			limits = []api.LimitJSON{*one.Limit}
		}
		states = one.States
	}
	if len(limits) > 0 {
		tw := newTable(w, "CONNECTOR\tLIMIT\tSET BY\tSET AT\tREASON")
		for _, l := range limits {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\n", l.Connector, l.Limit(), l.SetBy, l.SetAt.UTC().Format(time.RFC3339), orDash(l.Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(states) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w, "CONNECTOR\tTENANT\tCIRCUIT\tFAILURES\tOPEN UNTIL\tPAUSED UNTIL\tIN FLIGHT\tWAITING\tNEXT CALL AT")
	for _, s := range states {
		tenant := s.TenantID
		if tenant == "" {
			tenant = "(shared)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", s.Connector, tenant, s.Circuit, s.Failures,
			timeOrDash(s.OpenUntil), timeOrDash(s.PausedUntil), s.InFlight, s.Waiting, timeOrDash(s.NextAt))
	}
	return tw.Flush()
}

// timeOrDash is t in RFC 3339 (UTC, milliseconds), or "-" for nil.
func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
