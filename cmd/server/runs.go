package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

// runsUsage is the synopsis of `server runs`.
const runsUsage = `server runs show -tenant T ID [-o table|json]    guardrails, counts, pending events and deadlines
server runs cancel -tenant T ID -reason R [-actor A]`

// runRuns shows and cancels runs (effects.RunSpec: the effects of one agent run or workflow), of
// any tenant, through package ops.
func runRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server runs", runsUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	switch cmd.action {
	case "show", "cancel":
	default:
		return cmd.unknownAction("runs action")
	}
	tenant := fs.String("tenant", "", "the run's tenant: run ids are per tenant (required)")
	output := outputFlag(fs)
	var reason, actor *string
	if cmd.action == "cancel" {
		reason = fs.String("reason", "", "why, for the audit trail (required)")
		actor = actorFlag(fs)
	}
	id, err := parseWithID(fs, cmd.args, true)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if *tenant == "" {
		return fmt.Errorf("%w: -tenant is required: run ids are per tenant", errUsage)
	}
	if reason != nil { // the action's checks, before the database is opened
		if err := ops.CheckAction(*actor, *reason); err != nil {
			return cmd.opsError(err)
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		return cmd.withOps(ctx, pool, func(o *ops.Ops) error {
			if cmd.action == "show" {
				detail, err := o.Run(ctx, ops.Scope{}, *tenant, id)
				if errors.Is(err, ops.ErrNotFound) {
					return fmt.Errorf("tenant %s has no run %q", *tenant, id)
				}
				if err != nil {
					return err
				}
				if *output == "json" {
					out := struct {
						Run      *api.RunJSON      `json:"run"`
						Awaiting []*api.EffectJSON `json:"awaiting"`
					}{api.RunToJSON(detail.Run), effectsToJSON(detail.Awaiting)}
					return printJSON(stdout, out)
				}
				return printRun(stdout, detail)
			}
			res, err := o.CancelRun(ctx, ops.Scope{}, *tenant, id, *actor, *reason)
			if errors.Is(err, ops.ErrNotFound) {
				return fmt.Errorf("tenant %s has no run %q", *tenant, id)
			}
			if err != nil {
				return err
			}
			if *output == "json" {
				return printJSON(stdout, struct {
					Run      *api.RunJSON `json:"run"`
					Failed   []uuid.UUID  `json:"failed"`
					Awaiting []uuid.UUID  `json:"awaiting"`
					Left     []uuid.UUID  `json:"left"`
				}{api.RunToJSON(res.Run), res.Failed, res.Awaiting, res.Left})
			}
			fmt.Fprintf(stdout, "run %s of tenant %s cancelled by %s: %d effect(s) FAILED, %d awaiting a callback cancelled, %d in flight left to finish\n",
				id, *tenant, res.Run.CancelledBy, len(res.Failed), len(res.Awaiting), len(res.Left))
			return nil
		})
	})
}

// printRun prints a run's status, guardrails, effects per state and the events it awaits.
func printRun(w io.Writer, d *ops.RunDetail) error {
	r := d.Run
	limit := func(n int) string {
		if n == 0 {
			return "none"
		}
		return fmt.Sprint(n)
	}
	fmt.Fprintf(w, "run %s of tenant %s, created %s\n", r.ID, r.TenantID, r.CreatedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "guardrails: max steps %s, max consecutive failures %s\n", limit(r.MaxSteps), limit(r.MaxConsecutiveFailures))
	fmt.Fprintf(w, "steps %d, failures %d, consecutive failures %d\n", r.Steps, r.Failures, r.ConsecutiveFailures)
	switch {
	case r.CancelledAt != nil:
		fmt.Fprintf(w, "cancelled %s by %s: %s\n", r.CancelledAt.Format(time.RFC3339), r.CancelledBy, r.CancelReason)
	case r.Halted != nil:
		fmt.Fprintf(w, "halted: %v\n", r.Halted)
	default:
		fmt.Fprintln(w, "accepting effects")
	}
	states := make([]string, 0, len(r.Effects))
	for _, s := range effects.States {
		if n := r.Effects[s]; n > 0 {
			states = append(states, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(states) == 0 {
		states = []string{"none"}
	}
	fmt.Fprintf(w, "effects: %s\n\n", strings.Join(states, ", "))
	if len(d.Awaiting) == 0 {
		fmt.Fprintln(w, "no pending events")
		return nil
	}
	tw := newTable(w, "AWAITING EFFECT\tCONNECTOR\tCORRELATION ID\tDEADLINE")
	for _, e := range d.Awaiting {
		deadline := "-"
		if e.DeadlineAt != nil {
			deadline = e.DeadlineAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ID, e.Connector, e.CorrelationID, deadline)
	}
	return tw.Flush()
}
