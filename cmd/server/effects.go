package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
)

// effectsUsage is the synopsis of `server effects`.
const effectsUsage = `server effects list [filters] [-limit N] [-after CURSOR] [-o table|json]
                                        effects of every tenant, newest first
server effects show ID [-o table|json]   an effect's evidence: history, compensations, saga, run, turn
server effects resolve ID -to CONFIRMED|FAILED|PENDING -reason R [-actor A]
                                        decide a STUCK effect
server effects resolve -all [filters] -to STATE -reason R (-dry-run | -yes) [-actor A]
                                        decide every STUCK effect the filters match
server effects cancel ID -reason R [-actor A]
                                        fail a PENDING effect never attempted

filters: -tenant T -state S -connector C -idempotency-key K -business-key K -run R -turn ID
         -created-after TIME -created-before TIME (RFC 3339)
The audit trail records the actor as operator:cli:{OS user}, or operator:cli:{A} with -actor A.`

// effectFilterFlags are the filters of `server effects list` and `resolve -all`, by the names of
// ops.ParseEffectFilter (flags use '-' where it has '_').
var effectFilterFlags = []string{"tenant", "state", "connector", "idempotency_key", "business_key", "run", "turn", "created_after", "created_before"}

// flagName is the flag of a filter or action field.
func flagName(field string) string { return "-" + strings.ReplaceAll(field, "_", "-") }

// runEffects: server effects list | show | resolve | cancel.
func runEffects(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server effects", effectsUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	filters := map[string]*string{}
	addFilters := func() {
		for _, name := range effectFilterFlags {
			filters[name] = fs.String(strings.TrimPrefix(flagName(name), "-"), "", "filter: "+strings.ReplaceAll(name, "_", " "))
		}
	}
	output := fs.String("o", "table", "output: table or json")
	var limit, after, to, reason, actor *string
	var all, dryRun, yes *bool
	switch cmd.action {
	case "list":
		addFilters()
		limit = fs.String("limit", "", fmt.Sprintf("effects per page (default %d, at most %d)", ops.DefaultLimit, ops.MaxLimit))
		after = fs.String("after", "", "the cursor printed after the previous page")
	case "show":
	case "resolve", "cancel":
		if cmd.action == "resolve" {
			to = fs.String("to", "", "the decision: CONFIRMED (it happened), FAILED (it did not) or PENDING (dispatch it again)")
			all = fs.Bool("all", false, "resolve every STUCK effect the filters match instead of one ID")
			dryRun = fs.Bool("dry-run", false, "with -all: list the effects that would be resolved, change nothing")
			yes = fs.Bool("yes", false, "with -all: resolve them (required without -dry-run)")
			addFilters()
		}
		reason = fs.String("reason", "", "why (required; recorded in the audit trail)")
		actor = fs.String("actor", "", "who decides, recorded as operator:cli:{actor} (default: the OS user)")
	default:
		return cmd.unknownAction("effects action")
	}
	wantID := cmd.action != "list"
	if cmd.action == "resolve" {
		// -all takes the place of the ID; look for it before parsing, as parseWithID needs to know.
		for _, a := range cmd.args {
			if a == "-all" || a == "--all" || a == "-all=true" || a == "--all=true" {
				wantID = false
			}
		}
	}
	rawID, err := parseWithID(fs, cmd.args, wantID)
	if err != nil {
		return err
	}
	bulk := all != nil && *all
	if *output != "table" && *output != "json" {
		return fmt.Errorf("%w: -o %q: want table or json", errUsage, *output)
	}
	var id uuid.UUID
	if wantID {
		if id, err = uuid.Parse(rawID); err != nil {
			return fmt.Errorf("%w: effect ID %q is not a UUID", errUsage, rawID)
		}
	}
	var filter ops.EffectFilter
	if cmd.action == "list" || bulk {
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
		if filter, err = ops.ParseEffectFilter(values); err != nil {
			return usageError(err)
		}
	} else if cmd.action == "resolve" {
		for name, value := range filters {
			if *value != "" {
				return fmt.Errorf("%w: %s filters effects for -all; with an ID it does not apply", errUsage, flagName(name))
			}
		}
	}
	var to2 effects.State
	if to != nil {
		to2 = effects.State(strings.ToUpper(*to))
		if to2 != effects.StateConfirmed && to2 != effects.StateFailed && to2 != effects.StatePending {
			return fmt.Errorf("%w: -to %q: want CONFIRMED, FAILED or PENDING", errUsage, *to)
		}
	}
	if reason != nil && strings.TrimSpace(*reason) == "" {
		return fmt.Errorf("%w: -reason is required: it goes to the audit trail", errUsage)
	}
	if bulk && !*dryRun && !*yes {
		return fmt.Errorf("%w: -all changes every STUCK effect the filters match: add -dry-run to list them, then -yes to resolve them", errUsage)
	}
	who := ""
	if actor != nil {
		who = cliActor()
		if *actor != "" {
			who = "cli:" + *actor
		}
	}
	if _, err := cmd.common.logger(); err != nil {
		return err
	}
	err = cmd.common.withPool(ctx, 4, func(ctx context.Context, pool *pgxpool.Pool) error {
		o, err := newOps(ctx, pool)
		if err != nil {
			return err
		}
		all := ops.Scope{} // the database URL sees every tenant
		switch {
		case cmd.action == "list":
			page, next, err := o.Effects(ctx, filter)
			if err != nil {
				return err
			}
			return printEffects(stdout, *output, page, next)
		case cmd.action == "show":
			ev, err := o.Evidence(ctx, all, id)
			if err != nil {
				return err
			}
			return printEvidence(stdout, *output, ev)
		case bulk:
			filter.Scope = all
			ids, total, err := o.PreviewResolve(ctx, filter, ops.MaxBulk)
			if err != nil {
				return err
			}
			if *dryRun {
				return printPreview(ctx, o, stdout, *output, ids, total, to2)
			}
			if total > len(ids) {
				return fmt.Errorf("%d STUCK effects match, more than %d at once: narrow the filters", total, ops.MaxBulk)
			}
			result, err := o.ResolveMany(ctx, all, ids, to2, who, *reason)
			if err != nil {
				return err
			}
			return printBulk(stdout, *output, result, to2)
		case cmd.action == "resolve":
			e, err := o.Resolve(ctx, all, id, to2, who, *reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "resolved effect %s %s\n", e.ID, e.State)
		case cmd.action == "cancel":
			e, err := o.Cancel(ctx, all, id, who, *reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "cancelled effect %s (%s)\n", e.ID, e.State)
		}
		return nil
	})
	return usageError(err)
}

// usageError makes a *ops.FieldError a usage mistake (exit status 2) naming the flag.
func usageError(err error) error {
	var fe *ops.FieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("%w: %s: %s", errUsage, flagName(fe.Field), fe.Message)
	}
	return err
}

// newOps is the operators' reads and actions over pool, for the CLI (no client is started).
func newOps(ctx context.Context, pool *pgxpool.Pool) (*ops.Ops, error) {
	logger := slog.New(slog.DiscardHandler)
	sessions, err := newTurnsClient(pool, logger)
	if err != nil {
		return nil, err
	}
	sagas, err := newSagaClient(ctx, pool, logger)
	if err != nil {
		return nil, err
	}
	client, err := effects.NewClient(pool, &effects.Config{Registry: effects.NewRegistry(), Logger: logger, Plugins: []effects.Plugin{sessions, sagas}})
	if err != nil {
		return nil, err
	}
	return ops.New(pool, client, sagas, sessions), nil
}

// effectJSON is an effect in -o json, with the API's field names.
type effectJSON struct {
	ID             uuid.UUID       `json:"id"`
	TenantID       string          `json:"tenant_id"`
	Connector      string          `json:"connector"`
	State          effects.State   `json:"state"`
	Policy         effects.Policy  `json:"policy"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey string          `json:"idempotency_key"`
	BusinessKey    string          `json:"business_key,omitempty"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	RunID          string          `json:"run_id,omitempty"`
	TurnID         *uuid.UUID      `json:"turn_id,omitempty"`
	CompensatesID  *uuid.UUID      `json:"compensates_id,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

func effectOut(e *effects.Effect) *effectJSON {
	if e == nil {
		return nil
	}
	return &effectJSON{
		ID: e.ID, TenantID: e.TenantID, Connector: e.Connector, State: e.State, Policy: e.Policy, Args: e.Args,
		IdempotencyKey: e.IdempotencyKey, BusinessKey: e.BusinessKey, Attempts: e.Attempts, MaxAttempts: e.MaxAttempts,
		Result: e.Result, Error: e.Error, RunID: e.RunID, TurnID: e.TurnID, CompensatesID: e.CompensatesID,
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
}

func effectsOut(list []*effects.Effect) []*effectJSON {
	out := make([]*effectJSON, len(list))
	for i, e := range list {
		out[i] = effectOut(e)
	}
	return out
}

func printEffects(w io.Writer, output string, page []*effects.Effect, next string) error {
	if output == "json" {
		return printJSON(w, struct {
			Effects []*effectJSON `json:"effects"`
			Next    string        `json:"next,omitempty"`
		}{effectsOut(page), next})
	}
	tw := newTable(w, "ID\tTENANT\tCONNECTOR\tSTATE\tIDEMPOTENCY KEY\tATTEMPTS\tCREATED")
	for _, e := range page {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", e.ID, e.TenantID, e.Connector, e.State, e.IdempotencyKey,
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

type transitionJSON struct {
	From    effects.State   `json:"from,omitempty"`
	To      effects.State   `json:"to"`
	Actor   string          `json:"actor"`
	Reason  string          `json:"reason"`
	Attempt int             `json:"attempt"`
	At      time.Time       `json:"at"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

func printEvidence(w io.Writer, output string, ev *ops.Evidence) error {
	if output == "json" {
		out := struct {
			Effect        *effectJSON      `json:"effect"`
			History       []transitionJSON `json:"history"`
			Compensations []*effectJSON    `json:"compensations"`
			Compensates   *effectJSON      `json:"compensates,omitempty"`
			SagaID        *uuid.UUID       `json:"saga_id,omitempty"`
			SagaName      string           `json:"saga_name,omitempty"`
			SagaState     string           `json:"saga_state,omitempty"`
			Run           *effects.Run     `json:"run,omitempty"`
			TurnID        *uuid.UUID       `json:"turn_id,omitempty"`
			SessionKey    string           `json:"session_key,omitempty"`
		}{Effect: effectOut(ev.Effect), Compensations: effectsOut(ev.Compensations), Compensates: effectOut(ev.Compensates), Run: ev.Run}
		for _, t := range ev.History {
			out.History = append(out.History, transitionJSON{From: t.From, To: t.To, Actor: t.Actor, Reason: t.Reason, Attempt: t.Attempt, At: t.At, Detail: t.Detail})
		}
		if ev.Saga != nil {
			out.SagaID, out.SagaName, out.SagaState = &ev.Saga.ID, ev.Saga.Name, string(ev.Saga.State)
		}
		if ev.Turn != nil {
			out.TurnID, out.SessionKey = &ev.Turn.ID, ev.Turn.SessionKey
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
	row("state", string(e.State))
	row("idempotency key", e.IdempotencyKey)
	row("business key", e.BusinessKey)
	row("attempts", fmt.Sprintf("%d of %d", e.Attempts, e.MaxAttempts))
	row("args", string(e.Args))
	row("result", string(e.Result))
	row("error", e.Error)
	row("created", e.CreatedAt.UTC().Format(time.RFC3339))
	row("updated", e.UpdatedAt.UTC().Format(time.RFC3339))
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

// printPreview prints what resolve -all -dry-run would do: the count, then the effects.
func printPreview(ctx context.Context, o *ops.Ops, w io.Writer, output string, ids []uuid.UUID, total int, to effects.State) error {
	list := make([]*effects.Effect, 0, len(ids))
	for _, id := range ids {
		ev, err := o.Evidence(ctx, ops.Scope{}, id)
		if errors.Is(err, ops.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		list = append(list, ev.Effect)
	}
	if output == "json" {
		return printJSON(w, struct {
			WouldResolve int           `json:"would_resolve"`
			To           effects.State `json:"to"`
			Effects      []*effectJSON `json:"effects"`
		}{total, to, effectsOut(list)})
	}
	fmt.Fprintf(w, "%d effects would be resolved %s\n", total, to)
	return printEffects(w, "table", list, "")
}

func printBulk(w io.Writer, output string, result *ops.BulkResult, to effects.State) error {
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
