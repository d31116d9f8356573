package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// effectsUsage is the synopsis of `server effects`.
const effectsUsage = `server effects list [filters] [-limit N] [-after CURSOR] [-o table|json]
                                        effects of every tenant, newest first
server effects show ID [-o table|json]   an effect's evidence: history, compensations, saga, run, turn
server effects awaiting [-limit N] [-after CURSOR] [-o table|json]
                                        effects awaiting their confirmation, longest waiting first,
                                        with their prompts
server effects resolve ID -to CONFIRMED|FAILED|PENDING -reason R [-actor A]
                                        decide a STUCK effect
server effects resolve -all [filters] -to STATE -reason R (-dry-run | -yes) [-actor A]
                                        decide every STUCK effect the filters match
server effects redrive ID -reason R [-actor A]
                                        send a FAILED effect again: PENDING, same idempotency key,
                                        fresh attempt budget
server effects redrive -all [filters] -reason R (-dry-run | -yes) [-actor A]
                                        redrive every FAILED effect the filters match
server effects cancel ID -reason R [-actor A]
                                        fail a PENDING effect never attempted
server effects confirm ID -reason R [-actor A]
                                        confirm an effect awaiting its confirmation: it is dispatched
server effects decline ID -reason R [-actor A]
                                        decline an effect awaiting its confirmation: it is FAILED

filters: -tenant T -state S -connector C -idempotency-key K -business-key K -run R -turn ID
         -created-after TIME -created-before TIME (RFC 3339)
The audit trail records the actor as operator:cli:{OS user}, or operator:{A} with -actor A.`

// effectFilterFlags are the filters of `server effects list`, `resolve -all` and `redrive -all`, by the names of
// ops.ParseEffectFilter (flags use '-' where it has '_').
var effectFilterFlags = []string{"tenant", "state", "connector", "idempotency_key", "business_key", "run", "turn", "created_after", "created_before"}

// runEffects: server effects list | show | awaiting | resolve | redrive | cancel | confirm | decline.
func runEffects(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server effects", effectsUsage, args, stdout)
	if err != nil {
		return err
	}
	f, ok := defineEffectsFlags(cmd.fs, cmd.action)
	if !ok {
		return cmd.unknownAction("effects action")
	}
	filters, output, limit, after, to, reason, actor := f.filters, f.output, f.limit, f.after, f.to, f.reason, f.actor
	rawID, wantID, err := parseEffectArgs(cmd)
	if err != nil {
		return err
	}
	bulk := f.all != nil && *f.all
	dryRun, yes := f.dryRun, f.yes
	if err := checkOutput(*output); err != nil {
		return err
	}
	var id uuid.UUID
	if wantID {
		if id, err = uuid.Parse(rawID); err != nil {
			return fmt.Errorf("%w: effect ID %q is not a UUID", errUsage, jsonx.SafeText(rawID))
		}
	}
	var filter ops.EffectFilter
	if cmd.action == "list" || bulk {
		if filter, err = parseEffectFilterFlags(filters, limit, after); err != nil {
			return cmd.opsError(err)
		}
	} else if cmd.action == "resolve" || cmd.action == "redrive" {
		for name, value := range filters {
			if *value != "" {
				return fmt.Errorf("%w: -%s filters effects for -all; with an ID it does not apply", errUsage, strings.ReplaceAll(name, "_", "-"))
			}
		}
	}
	pageSize := 0
	if cmd.action == "awaiting" {
		if pageSize, err = ops.ParsePageLimit(*limit); err != nil {
			return cmd.opsError(err)
		}
	}
	var to2 effects.State
	if to != nil {
		if to2, err = ops.ParseResolveTarget(*to); err != nil {
			return cmd.opsError(err)
		}
	}
	if bulk && !*dryRun && !*yes {
		return fmt.Errorf("%w: -all changes every %s effect the filters match: add -dry-run to list them, then -yes to %s them",
			errUsage, map[string]string{"resolve": "STUCK", "redrive": "FAILED"}[cmd.action], cmd.action)
	}
	who := ""
	if actor != nil {
		who = *actor
	}
	if reason != nil { // the actions' checks, before the database is opened
		if err := ops.CheckAction(who, *reason); err != nil {
			return cmd.opsError(err)
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		return cmd.withOps(ctx, pool, func(o *ops.Ops) error {
			all := ops.Scope{} // the database URL sees every tenant
			switch {
			case cmd.action == "list":
				page, next, err := o.Effects(ctx, filter)
				if err != nil {
					return err
				}
				return printEffects(stdout, *output, page, next)
			case cmd.action == "awaiting":
				page, total, next, err := o.Awaiting(ctx, all, pageSize, *after)
				if err != nil {
					return err
				}
				return printAwaiting(stdout, *output, page, total, next)
			case cmd.action == "show":
				ev, err := o.Evidence(ctx, all, id)
				if err != nil {
					return err
				}
				return printEvidence(stdout, *output, ev)
			case bulk && cmd.action == "redrive":
				filter.Scope = all
				return redriveAll(ctx, o, filter, *dryRun, who, *reason, *output, stdout)
			case bulk:
				filter.Scope = all
				return resolveAll(ctx, o, filter, *dryRun, to2, who, *reason, *output, stdout)
			default:
				return decideEffect(ctx, o, cmd.action, id, to2, who, *reason, stdout)
			}
		})
	})
}

// effectsFlags are the flags of one `server effects` action; nil: not a flag of that action.
type effectsFlags struct {
	filters                         map[string]*string // by the names of ops.ParseEffectFilter
	output                          *string
	limit, after, to, reason, actor *string
	all, dryRun, yes                *bool
}

// defineEffectsFlags defines on fs the flags of action; false for an action it does not know.
func defineEffectsFlags(fs *flag.FlagSet, action string) (*effectsFlags, bool) {
	f := &effectsFlags{filters: map[string]*string{}}
	addFilters := func() {
		for _, name := range effectFilterFlags {
			f.filters[name] = fs.String(strings.ReplaceAll(name, "_", "-"), "", "filter: "+strings.ReplaceAll(name, "_", " "))
		}
	}
	f.output = outputFlag(fs)
	switch action {
	case "list", "awaiting":
		if action == "list" {
			addFilters()
		}
		f.limit = fs.String("limit", "", fmt.Sprintf("effects per page (default %d, at most %d)", ops.DefaultLimit, ops.MaxLimit))
		f.after = fs.String("after", "", "the cursor printed after the previous page")
	case "show":
	case "resolve", "redrive", "cancel", "confirm", "decline":
		if action == "resolve" {
			f.to = fs.String("to", "", "the decision: CONFIRMED (it happened), FAILED (it did not) or PENDING (dispatch it again)")
		}
		if action == "resolve" || action == "redrive" {
			state := map[string]string{"resolve": "STUCK", "redrive": "FAILED"}[action]
			f.all = fs.Bool("all", false, action+" every "+state+" effect the filters match instead of one ID")
			f.dryRun = fs.Bool("dry-run", false, "with -all: list the effects that would be "+action+"d, change nothing")
			f.yes = fs.Bool("yes", false, "with -all: "+action+" them (required without -dry-run)")
			addFilters()
		}
		f.reason = fs.String("reason", "", "why (required; recorded in the audit trail)")
		f.actor = actorFlag(fs)
	default:
		return nil, false
	}
	return f, true
}

// parseEffectArgs parses the command's flags and its effect ID, which every action but list,
// awaiting and resolve -all takes (wantID false for those).
func parseEffectArgs(cmd *command) (rawID string, wantID bool, err error) {
	wantID = cmd.action != "list" && cmd.action != "awaiting"
	if cmd.action == "resolve" || cmd.action == "redrive" {
		// -all takes the place of the ID; look for it before parsing, as parseWithID needs to know.
		for _, a := range cmd.args {
			if a == "-all" || a == "--all" || a == "-all=true" || a == "--all=true" {
				wantID = false
			}
		}
	}
	rawID, err = parseWithID(cmd.fs, cmd.args, wantID)
	return rawID, wantID, err
}

// parseEffectFilterFlags is ops.ParseEffectFilter of the filter flags given (by their names in
// ops), -limit and -after (nil: not a flag of the action).
func parseEffectFilterFlags(filters map[string]*string, limit, after *string) (ops.EffectFilter, error) {
	values := url.Values{}
	for name, value := range filters {
		if *value != "" {
			values.Set(name, *value)
		}
	}
	if limit != nil && *limit != "" {
		values.Set("limit", *limit)
	}
	if after != nil && *after != "" {
		values.Set("after", *after)
	}
	return ops.ParseEffectFilter(values)
}

// resolveAll is `server effects resolve -all`: it lists the STUCK effects filter matches (at most
// ops.MaxBulk) with dryRun, else resolves them to to.
func resolveAll(ctx context.Context, o *ops.Ops, filter ops.EffectFilter, dryRun bool, to effects.State, who, reason, output string, stdout io.Writer) error {
	matched, total, err := o.PreviewResolve(ctx, filter, ops.MaxBulk)
	if err != nil {
		return err
	}
	if dryRun {
		return printPreview(stdout, output, matched, total, to)
	}
	if total > len(matched) {
		return fmt.Errorf("%d STUCK effects match, more than %d at once: narrow the filters", total, ops.MaxBulk)
	}
	result, err := o.ResolveMany(ctx, filter.Scope, effectIDs(matched), to, who, reason)
	if err != nil {
		return err
	}
	return printBulk(stdout, output, result, to)
}

// redriveAll is `server effects redrive -all`: it lists the FAILED effects filter matches that a
// redrive does not refuse by their record (at most ops.MaxBulk) with dryRun, else redrives them.
func redriveAll(ctx context.Context, o *ops.Ops, filter ops.EffectFilter, dryRun bool, who, reason, output string, stdout io.Writer) error {
	matched, total, err := o.PreviewRedrive(ctx, filter, ops.MaxBulk)
	if err != nil {
		return err
	}
	if dryRun {
		return printPreview(stdout, output, matched, total, "")
	}
	if total > len(matched) {
		return fmt.Errorf("more than %d FAILED effects match: narrow the filters", ops.MaxBulk)
	}
	result, err := o.RedriveMany(ctx, filter.Scope, effectIDs(matched), who, reason)
	if err != nil {
		return err
	}
	return printBulk(stdout, output, result, "")
}

// effectIDs are the ids of list, in its order.
func effectIDs(list []*effects.Effect) []uuid.UUID {
	ids := make([]uuid.UUID, len(list))
	for i, e := range list {
		ids[i] = e.ID
	}
	return ids
}

// decideEffect is `server effects resolve|cancel|confirm|decline ID`, on every tenant's effects.
func decideEffect(ctx context.Context, o *ops.Ops, action string, id uuid.UUID, to effects.State, who, reason string, stdout io.Writer) error {
	all := ops.Scope{} // the database URL sees every tenant
	var e *effects.Effect
	var err error
	var done string // the line printed, of the effect's ID and state
	switch action {
	case "resolve":
		e, err = o.Resolve(ctx, all, id, to, who, reason)
		done = "resolved effect %s %s\n"
	case "redrive":
		e, err = o.Redrive(ctx, all, id, who, reason)
		done = "redrove effect %s (%s): the reactors dispatch it again\n"
	case "cancel":
		e, err = o.Cancel(ctx, all, id, who, reason)
		done = "cancelled effect %s (%s)\n"
	case "confirm":
		e, err = o.Confirm(ctx, all, id, who, reason)
		done = "confirmed effect %s (%s): the reactors dispatch it\n"
	case "decline":
		e, err = o.Decline(ctx, all, id, who, reason)
		done = "declined effect %s (%s)\n"
	default:
		return fmt.Errorf("effects: no action %q", action)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, done, e.ID, e.State)
	return nil
}

// effectsToJSON is list as the API answers it (api.EffectToJSON).
func effectsToJSON(list []*effects.Effect) []*api.EffectJSON {
	out := make([]*api.EffectJSON, len(list))
	for i, e := range list {
		out[i] = api.EffectToJSON(e)
	}
	return out
}

func printEffects(w io.Writer, output string, page []*effects.Effect, next string) error {
	if output == "json" {
		return printJSON(w, struct {
			Effects    []*api.EffectJSON `json:"effects"`
			NextCursor string            `json:"next_cursor,omitempty"`
		}{effectsToJSON(page), next})
	}
	tw := newTable(w, "ID\tTENANT\tCONNECTOR\tSTATE\tIDEMPOTENCY KEY\tATTEMPTS\tCREATED")
	for _, e := range page {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", e.ID, e.TenantID, e.Connector, stateText(e), e.IdempotencyKey,
			e.Attempts, e.MaxAttempts, e.CreatedAt.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(w, "more: -after %s\n", next)
	}
	return nil
}

// stateText is an effect's state for a table, with its confirmation hold while it awaits one.
func stateText(e *effects.Effect) string {
	if e.Confirmation == effects.ConfirmationAwaiting {
		return string(e.State) + " (awaiting confirmation)"
	}
	return string(e.State)
}

// printAwaiting prints a page of the effects awaiting confirmation: in JSON as the API answers
// effects, with the total; as a table with how long each has waited, its expiry and its prompt.
func printAwaiting(w io.Writer, output string, page []*effects.Effect, total int, next string) error {
	if output == "json" {
		return printJSON(w, struct {
			Effects    []*api.EffectJSON `json:"effects"`
			Total      int               `json:"total"`
			NextCursor string            `json:"next_cursor,omitempty"`
		}{effectsToJSON(page), total, next})
	}
	fmt.Fprintf(w, "%d awaiting confirmation\n", total)
	tw := newTable(w, "ID\tTENANT\tCONNECTOR\tWAITING\tEXPIRES\tPROMPT")
	now := time.Now()
	for _, e := range page {
		expires := "never"
		if e.ConfirmationExpiresAt != nil {
			expires = e.ConfirmationExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.TenantID, e.Connector,
			now.Sub(e.CreatedAt).Round(time.Second), expires, oneLine(e.ConfirmationPrompt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(w, "more: -after %s\n", next)
	}
	return nil
}

// oneLine is s with its line breaks and tabs as spaces, for a table cell.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}

// printEvidence prints an effect's evidence: in JSON, the effect with its history, its
// compensations and what it compensates, its saga, run and turn, each as the API answers it.
func printEvidence(w io.Writer, output string, ev *ops.Evidence) error {
	if output == "json" {
		out := struct {
			Effect        *api.EffectJSON   `json:"effect"`
			Compensations []*api.EffectJSON `json:"compensations"`
			Compensates   *api.EffectJSON   `json:"compensates,omitempty"`
			Saga          *api.SagaJSON     `json:"saga,omitempty"`
			Run           *api.RunJSON      `json:"run,omitempty"`
			Turn          *api.TurnJSON     `json:"turn,omitempty"`
		}{Effect: api.EffectToJSON(ev.Effect), Compensations: effectsToJSON(ev.Compensations)}
		out.Effect.History = api.TransitionsToJSON(ev.History)
		if ev.Order != nil && ev.Order.HeldBy != nil {
			out.Effect.HeldBy = &ev.Order.HeldBy.ID
		}
		if ev.Compensates != nil {
			out.Compensates = api.EffectToJSON(ev.Compensates)
		}
		if ev.Saga != nil {
			out.Saga = api.SagaToJSON(ev.Saga)
		}
		if ev.Run != nil {
			out.Run = api.RunToJSON(ev.Run)
		}
		if ev.Turn != nil {
			out.Turn = api.TurnToJSON(ev.Turn)
		}
		return printJSON(w, out)
	}
	e := ev.Effect
	tw := newTable(w, "EFFECT\t"+e.ID.String())
	row := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s\t%s\n", name, value)
		}
	}
	row("tenant", e.TenantID)
	row("connector", e.Connector)
	row("state", stateText(e))
	row("idempotency key", e.IdempotencyKey)
	row("business key", e.BusinessKey)
	row("ordering key", e.OrderingKey)
	if ev.Order != nil && ev.Order.HeldBy != nil {
		row("held by", fmt.Sprintf("%s (%s, %s)", ev.Order.HeldBy.ID, ev.Order.HeldBy.Connector, ev.Order.HeldBy.State))
	}
	row("attempts", fmt.Sprintf("%d of %d", e.Attempts, e.MaxAttempts))
	row("args", string(e.Args))
	row("result", string(e.Result))
	row("error", e.Error)
	row("created", e.CreatedAt.UTC().Format(time.RFC3339))
	row("updated", e.UpdatedAt.UTC().Format(time.RFC3339))
	if e.Confirmation != "" {
		row("confirmation", string(e.Confirmation))
		row("prompt", oneLine(e.ConfirmationPrompt))
		if e.ConfirmationExpiresAt != nil {
			row("confirmation expires", e.ConfirmationExpiresAt.UTC().Format(time.RFC3339))
		}
		if e.ConfirmationAt != nil {
			row("decided", fmt.Sprintf("%s by %s: %s", e.ConfirmationAt.UTC().Format(time.RFC3339), e.ConfirmationBy, oneLine(e.ConfirmationReason)))
		}
	}
	if ev.Compensates != nil {
		row("compensates", ev.Compensates.ID.String()+" ("+string(ev.Compensates.State)+")")
	}
	for _, c := range ev.Compensations {
		row("compensation", c.ID.String()+" ("+string(c.State)+")")
	}
	if ev.Saga != nil {
		row("saga", fmt.Sprintf("%s %s (%s)", ev.Saga.ID, ev.Saga.Name, ev.Saga.State))
	}
	if ev.Run != nil {
		row("run", ev.Run.ID)
	} else {
		row("run", e.RunID)
	}
	if ev.Turn != nil {
		row("turn", fmt.Sprintf("%s (session %s, %s)", ev.Turn.ID, ev.Turn.SessionKey, ev.Turn.Status))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w, "AT\tFROM\tTO\tATTEMPT\tACTOR\tREASON\tDETAIL")
	for _, t := range ev.History {
		from := string(t.From)
		if from == "" {
			from = "(new)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", t.At.UTC().Format(time.RFC3339Nano), from, t.To, t.Attempt, t.Actor, t.Reason, string(t.Detail))
	}
	return tw.Flush()
}

// printPreview prints what resolve -all -dry-run (to the decision) or redrive -all -dry-run (to
// "") would do: the count, then the effects.
func printPreview(w io.Writer, output string, list []*effects.Effect, total int, to effects.State) error {
	if to == "" {
		return printRedrivePreview(w, output, list, total)
	}
	if output == "json" {
		return printJSON(w, struct {
			WouldResolve int               `json:"would_resolve"`
			To           effects.State     `json:"to"`
			Effects      []*api.EffectJSON `json:"effects"`
		}{total, to, effectsToJSON(list)})
	}
	fmt.Fprintf(w, "%d effects would be resolved %s\n", total, to)
	tw := newTable(w, "ID\tTENANT\tCONNECTOR\tIDEMPOTENCY KEY\tSTUCK SINCE\tLAST ERROR")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.TenantID, e.Connector, e.IdempotencyKey,
			e.UpdatedAt.UTC().Format(time.RFC3339), e.Error)
	}
	return tw.Flush()
}

// printRedrivePreview prints what redrive -all -dry-run would do: the count, then the effects.
func printRedrivePreview(w io.Writer, output string, list []*effects.Effect, total int) error {
	if output == "json" {
		return printJSON(w, struct {
			WouldRedrive int               `json:"would_redrive"`
			Effects      []*api.EffectJSON `json:"effects"`
		}{total, effectsToJSON(list)})
	}
	more := ""
	if total > len(list) {
		more = "more than "
	}
	fmt.Fprintf(w, "%s%d effects would be redriven\n", more, len(list))
	tw := newTable(w, "ID\tTENANT\tCONNECTOR\tIDEMPOTENCY KEY\tFAILED AT\tATTEMPTS\tERROR")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", e.ID, e.TenantID, e.Connector, e.IdempotencyKey,
			e.UpdatedAt.UTC().Format(time.RFC3339), e.Attempts, e.MaxAttempts, oneLine(e.Error))
	}
	return tw.Flush()
}

// printBulk prints what resolve -all -yes (to the decision) or redrive -all -yes (to "") did.
func printBulk(w io.Writer, output string, result *ops.BulkResult, to effects.State) error {
	if to == "" {
		if output == "json" {
			return printJSON(w, struct {
				Redriven []uuid.UUID          `json:"redriven"`
				Skipped  map[uuid.UUID]string `json:"skipped"`
			}{result.Resolved, result.Skipped})
		}
		fmt.Fprintf(w, "redrove %d effects\n", len(result.Resolved))
		for id, why := range result.Skipped {
			fmt.Fprintf(w, "skipped %s: %s\n", id, why)
		}
		return nil
	}
	if output == "json" {
		return printJSON(w, struct {
			Resolved []uuid.UUID          `json:"resolved"`
			To       effects.State        `json:"to"`
			Skipped  map[uuid.UUID]string `json:"skipped"`
		}{result.Resolved, to, result.Skipped})
	}
	fmt.Fprintf(w, "resolved %d effects %s\n", len(result.Resolved), to)
	for id, why := range result.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", id, why)
	}
	return nil
}
