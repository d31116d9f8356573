package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/retention"
)

// retentionUsage is the synopsis of `server retention`.
const retentionUsage = `server retention status [-json]                          sizes, oldest rows, partitions, what the next run removes, last runs
server retention run [-dry-run] [-json]                  run retention once now (-dry-run: count, change nothing)
server retention policy set -tenant T -effect-retention D  keep tenant T's settled work D instead of -effect-retention
server retention policy unset -tenant T                  tenant T follows -effect-retention again
server retention policy list [-json]                     the tenants' policies
server retention partitions [-period day|month] [-premake D]  how the audit histories are cut from now on

status and run take the reactor's retention flags (-effect-retention, -audit-retention, -event-retention, -dedup-window,
-idempotency-ttl, -retention-batch, and their RECKON_ variables): give them the reactors' values.`

// runRetention: server retention status | run | policy set|unset|list | partitions.
func runRetention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server retention", retentionUsage, args, stdout)
	if err != nil {
		return err
	}
	switch cmd.action {
	case "status", "run":
		return retentionStatusOrRun(ctx, cmd, stdout)
	case "policy":
		return retentionPolicy(ctx, cmd.args, stdout)
	case "partitions":
		return retentionPartitions(ctx, cmd, stdout)
	default:
		return cmd.unknownAction("retention action")
	}
}

// retentionStatusOrRun is `server retention status` and `server retention run`.
func retentionStatusOrRun(ctx context.Context, cmd *command, stdout io.Writer) error {
	env := cli.EnvFlags{FlagSet: cmd.fs}
	var flags cli.RetentionFlags
	flags.Register(&env)
	asJSON := cmd.fs.Bool("json", false, "print JSON")
	var dryRun *bool
	if cmd.action == "run" {
		dryRun = cmd.fs.Bool("dry-run", false, "count what the run would remove and list the partitions it would drop; change nothing")
	}
	if err := parse(cmd.fs, cmd.args); err != nil {
		return err
	}
	if err := env.Err(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := flags.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	logger, err := cmd.common.logger()
	if err != nil {
		return err
	}
	// A run holds the retention lock on a connection of its own while it works on others.
	return cmd.common.withPool(ctx, 4, func(ctx context.Context, pool *pgxpool.Pool) error {
		config := flags.Config
		config.Logger = logger
		r, err := retention.New(pool, &config)
		if err != nil {
			return err
		}
		if cmd.action == "status" {
			status, err := r.Status(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, status)
			}
			printRetentionStatus(stdout, status)
			return nil
		}
		report, err := r.Run(ctx, &retention.RunOpts{Actor: cliActor(), DryRun: *dryRun})
		if errors.Is(err, retention.ErrBusy) {
			return errors.New("retention: another retention run is in progress (a reactor's, or another `server retention run`); nothing was done. `server retention status` shows it")
		}
		if report != nil {
			if *asJSON {
				if printErr := printJSON(stdout, report); printErr != nil {
					return errors.Join(err, printErr)
				}
			} else {
				printReport(stdout, report)
			}
		}
		return err
	})
}

// retentionPolicy is `server retention policy set|unset|list`.
func retentionPolicy(ctx context.Context, args []string, stdout io.Writer) error {
	cmd, err := newCommand("server retention policy", retentionUsage, args, stdout)
	if err != nil {
		return err
	}
	var tenant *string
	var effectRetention *time.Duration
	var asJSON *bool
	switch cmd.action {
	case "set":
		tenant = cmd.fs.String("tenant", "", "the tenant (required)")
		effectRetention = cmd.fs.Duration("effect-retention", 0, "how long the tenant's settled work is kept, at least 1h (required)")
	case "unset":
		tenant = cmd.fs.String("tenant", "", "the tenant (required)")
	case "list":
		asJSON = cmd.fs.Bool("json", false, "print a JSON array")
	default:
		return cmd.unknownAction("retention policy action")
	}
	if err := parse(cmd.fs, cmd.args); err != nil {
		return err
	}
	if tenant != nil {
		if *tenant == "" {
			return fmt.Errorf("%w: -tenant is required", errUsage)
		}
		if err := retention.CheckTenant(*tenant); err != nil {
			return fmt.Errorf("%w: -tenant: %v", errUsage, err)
		}
	}
	if effectRetention != nil && (*effectRetention < retention.MinEffectRetention || *effectRetention%time.Second != 0) {
		return fmt.Errorf("%w: -effect-retention is required, at least %v in whole seconds, got %v", errUsage, retention.MinEffectRetention, *effectRetention)
	}
	return cmd.runParsed(ctx, retention.ErrInvalid, func(ctx context.Context, pool *pgxpool.Pool) error {
		switch cmd.action {
		case "set":
			policy, err := retention.SetPolicy(ctx, pool, *tenant, *effectRetention)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "tenant %s: settled work kept %v (from the next run)\n", policy.TenantID, policy.EffectRetention)
		case "unset":
			deleted, err := retention.DeletePolicy(ctx, pool, *tenant)
			if err != nil {
				return err
			}
			if !deleted {
				fmt.Fprintf(stdout, "tenant %s had no policy: it follows -effect-retention\n", *tenant)
				return nil
			}
			fmt.Fprintf(stdout, "tenant %s: policy removed; it follows -effect-retention from the next run\n", *tenant)
		case "list":
			policies, err := retention.ListPolicies(ctx, pool)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, policies)
			}
			if len(policies) == 0 {
				fmt.Fprintln(stdout, "no policies: every tenant follows -effect-retention")
				return nil
			}
			tw := newTable(stdout, "TENANT\tEFFECT RETENTION\tUPDATED")
			for _, p := range policies {
				fmt.Fprintf(tw, "%s\t%v\t%s\n", p.TenantID, p.EffectRetention, p.UpdatedAt.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		}
		return nil
	})
}

// retentionPartitions is `server retention partitions`.
func retentionPartitions(ctx context.Context, cmd *command, stdout io.Writer) error {
	period := cmd.fs.String("period", "", "day or month: the range of each partition made from now on")
	premake := cmd.fs.Duration("premake", 0, "how far ahead of now partitions are made: 24h to 9600h (400 days)")
	if err := parse(cmd.fs, cmd.args); err != nil {
		return err
	}
	switch {
	case *period == "" && *premake == 0:
		return fmt.Errorf("%w: give -period day|month, -premake D, or both", errUsage)
	case *period != "" && *period != "day" && *period != "month":
		return fmt.Errorf("%w: -period must be day or month, got %q", errUsage, *period)
	case *premake != 0 && (*premake < 24*time.Hour || *premake > 400*24*time.Hour || *premake%time.Second != 0):
		return fmt.Errorf("%w: -premake must be between 24h and 9600h (400 days), in whole seconds, got %v", errUsage, *premake)
	}
	return cmd.runParsed(ctx, retention.ErrInvalid, func(ctx context.Context, pool *pgxpool.Pool) error {
		before, err := retention.GetAuditSettings(ctx, pool)
		if err != nil {
			return err
		}
		after, err := retention.SetAuditSettings(ctx, pool, *period, *premake)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "audit partitions: period %s → %s, premake %v → %v\n", before.Period, after.Period, before.Premake, after.Premake)
		fmt.Fprintln(stdout, "the partitions that exist keep their ranges; those made from now on (every retention run, every reactor start) follow the new settings")
		return nil
	})
}

// printRetentionStatus prints s as `server retention status` shows it.
func printRetentionStatus(w io.Writer, s *retention.Status) {
	fmt.Fprintf(w, "settings (at %s)\n", s.Now.UTC().Format(time.RFC3339))
	tw := newTable(w, "  SETTING\tVALUE")
	fmt.Fprintf(tw, "  effect retention\t%s\n", durationText(s.EffectRetention))
	for _, p := range s.Policies {
		fmt.Fprintf(tw, "    tenant %s\t%s\n", p.TenantID, durationText(p.EffectRetention))
	}
	fmt.Fprintf(tw, "  audit retention\t%s\n", durationOr(s.AuditRetention, "forever"))
	fmt.Fprintf(tw, "  event retention\t%s\n", durationOr(s.EventRetention, "forever"))
	fmt.Fprintf(tw, "  dedup window\t%s\n", durationOr(s.DedupWindow, "none (no tombstones)"))
	fmt.Fprintf(tw, "  idempotency ttl\t%s\n", durationText(s.IdempotencyTTL))
	fmt.Fprintf(tw, "  batch\t%d rows\n", s.BatchSize)
	fmt.Fprintf(tw, "  partitions\tper %s, made %s ahead\n", s.Audit.Period, durationText(s.Audit.Premake))
	_ = tw.Flush()

	fmt.Fprintln(w, "\ntables")
	tw = newTable(w, "  TABLE\tSIZE\tROWS (EST.)\tOLDEST\tPARTITIONS")
	for _, t := range s.Tables {
		var oldest []string
		for _, what := range sortedKeys(t.Oldest) {
			oldest = append(oldest, what+" "+t.Oldest[what].UTC().Format(time.RFC3339))
		}
		partitions := "-"
		if len(t.Partitions) > 0 {
			partitions = fmt.Sprint(len(t.Partitions))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", t.Name, bytesText(t.Bytes), t.RowsEstimate, orDash(strings.Join(oldest, ", ")), partitions)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\npartitions of the audit histories")
	tw = newTable(w, "  PARTITION\tFROM\tTO\tROWS (EST.)\tSIZE\tNEXT RUN")
	for _, p := range s.Partitions {
		next := "keep"
		switch {
		case p.Drop:
			next = "drop"
		case p.Held:
			next = "held (tells of an effect or saga that exists)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", p.Name, timeOr(p.From, "-"), timeOr(p.To, "-"), p.RowsEstimate, bytesText(p.Bytes), next)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\nnext run (a dry run now)")
	printReport(w, s.Next)

	fmt.Fprintln(w, "\nlast runs")
	if len(s.Runs) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw = newTable(w, "  ID\tSTARTED\tACTOR\tSTATE\tDURATION\tREMOVED")
	for _, run := range s.Runs {
		state, duration, removed := run.State, "-", "-"
		if run.DryRun {
			state += " (dry run)"
		}
		if run.Error != "" {
			state += ": " + run.Error
		}
		if run.Report != nil {
			duration = run.Report.Duration.Round(time.Millisecond).String()
			removed = fmt.Sprintf("%d rows, %d partitions", run.Report.RemovedTotal(), len(run.Report.PartitionsDropped))
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", run.ID, run.Started.UTC().Format(time.RFC3339), run.Actor, state, duration, removed)
	}
	_ = tw.Flush()
}

// printReport prints what a run removed (or, dry, would remove).
func printReport(w io.Writer, r *retention.Report) {
	verb, made, dropped := "removed", "made", "dropped"
	if r.DryRun {
		verb, made, dropped = "would remove", "would make", "would drop"
	}
	fmt.Fprintf(w, "%s %d rows", verb, r.RemovedTotal())
	if r.Duration > 0 {
		fmt.Fprintf(w, " in %v", r.Duration.Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	if r.RemovedTotal() > 0 {
		tw := newTable(w, "  TABLE\tROWS")
		for _, table := range sortedKeys(r.Removed) {
			if r.Removed[table] > 0 {
				fmt.Fprintf(tw, "  %s\t%d\n", table, r.Removed[table])
			}
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(w, "partitions: %s %d ahead, %s %d", made, r.PartitionsCreated, dropped, len(r.PartitionsDropped))
	if len(r.PartitionsHeld) > 0 {
		fmt.Fprintf(w, ", held %d (%s)", len(r.PartitionsHeld), strings.Join(r.PartitionsHeld, ", "))
	}
	fmt.Fprintln(w)
	for _, p := range r.PartitionsDropped {
		fmt.Fprintf(w, "  %s %s: %s to %s, %d rows\n", dropped, p.Partition, timeOr(p.From, "the beginning"), p.To.UTC().Format(time.RFC3339), p.Rows)
	}
	for _, d := range r.Deferred {
		fmt.Fprintf(w, "  deferred (waited for a lock longer than 2s; the next run tries again): %s\n", d)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func durationOr(d time.Duration, zero string) string {
	if d == 0 {
		return zero
	}
	return durationText(d)
}

// durationText is d, in days as well when it is whole days: "30 days (720h0m0s)".
func durationText(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return fmt.Sprintf("%d days (%v)", d/day, d)
	}
	return d.String()
}

func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// bytesText is n bytes in the largest binary unit that keeps it at least 1.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, suffix := float64(n), ""
	for _, s := range []string{"kB", "MB", "GB", "TB"} {
		value /= unit
		suffix = s
		if value < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s", value, suffix)
}
