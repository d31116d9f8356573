package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/api"
	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/jsonx"
	"github.com/reckonhq/reckon/internal/txn"
	"github.com/reckonhq/reckon/saga"
	"github.com/reckonhq/reckon/saga/sagadef"
)

// sagasUsage is the synopsis of `server sagas`.
const sagasUsage = `server sagas list [-tenant T] [-state S] [-name N] [-limit 50] [-after CURSOR] [-o table|json]
server sagas show ID [-o table|json]     steps, compensation order, history
server sagas resolve ID -decision retry_compensation|mark_compensated -reason R [-actor A]
server sagas define -f definition.json [-skip-connector-check]   (or -f - for stdin; docs/api.md)
server sagas definitions [-json]`

// runSagas lists, shows and resolves sagas of every tenant (package ops), and manages the saga
// definitions stored in reckon_saga_definitions (package saga/sagadef): define (validated;
// definitions never change) and definitions.
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
				if _, err := new(httpconn.Syncer).Sync(ctx, pool, registry); err != nil {
					return err
				}
			}
			var stored sagadef.Definition
			var created bool
			err = txn.Run(ctx, pool, nil, func(tx pgx.Tx) (err error) {
				stored, created, err = ops.PutSagaDefinition(ctx, tx, def, registry, ops.Changer{Actor: cliActor()})
				return err // an identical definition stored again changes nothing
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
	case "list", "show", "resolve":
		return runSagaOps(ctx, cmd, stdout)
	case "definitions":
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

// runSagaOps is `server sagas list|show|resolve`: the sagas of every tenant, through package ops.
func runSagaOps(ctx context.Context, cmd *command, stdout io.Writer) error {
	fs := cmd.fs
	output := outputFlag(fs)
	var (
		filter                  = map[string]*string{}
		decision, reason, actor *string
		id                      uuid.UUID
	)
	switch cmd.action {
	case "list":
		filter["tenant"] = fs.String("tenant", "", "only this tenant's sagas")
		filter["state"] = fs.String("state", "", "only sagas in this state: RUNNING, COMPLETED, COMPENSATING, COMPENSATED or STUCK")
		filter["name"] = fs.String("name", "", "only sagas of this definition")
		filter["limit"] = fs.String("limit", "", "sagas per page, 1 to 500 (default 50)")
		filter["after"] = fs.String("after", "", "the next page: the cursor a previous page printed")
	case "resolve":
		decision = fs.String("decision", "", "retry_compensation (a fresh compensation budget) or mark_compensated (undone by other means) (required)")
		reason = fs.String("reason", "", "why, for the saga's history (required)")
		actor = actorFlag(fs)
	}
	rawID, err := parseWithID(fs, cmd.args, cmd.action != "list")
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if rawID != "" {
		if id, err = uuid.Parse(rawID); err != nil {
			return fmt.Errorf("%w: ID %q is not a saga id (a UUID)", errUsage, jsonx.SafeText(rawID))
		}
	}
	var sagaFilter ops.SagaFilter
	if cmd.action == "list" {
		values := url.Values{}
		for name, v := range filter {
			if *v != "" {
				values.Set(name, *v)
			}
		}
		if sagaFilter, err = ops.ParseSagaFilter(values); err != nil {
			return cmd.opsError(err)
		}
	}
	if cmd.action == "resolve" {
		if _, err := ops.ParseDecision(*decision); err != nil {
			return cmd.opsError(err)
		}
		if err := ops.CheckAction(*actor, *reason); err != nil {
			return cmd.opsError(err)
		}
	}
	return cmd.runParsed(ctx, nil, func(ctx context.Context, pool *pgxpool.Pool) error {
		return cmd.withOps(ctx, pool, func(o *ops.Ops) error {
			switch cmd.action {
			case "list":
				sagas, next, err := o.Sagas(ctx, sagaFilter)
				if err != nil {
					return err
				}
				if *output == "json" {
					return printJSON(stdout, sagasJSON(sagas, next))
				}
				return printSagas(stdout, sagas, next)
			case "show":
				detail, err := o.Saga(ctx, ops.Scope{}, id)
				if errors.Is(err, ops.ErrNotFound) {
					return fmt.Errorf("saga %s not found", id)
				}
				if err != nil {
					return err
				}
				if *output == "json" {
					return printJSON(stdout, sagaDetailJSON(detail))
				}
				return printSagaDetail(stdout, detail)
			default: // resolve
				s, err := o.ResolveSaga(ctx, ops.Scope{}, id, saga.Decision(*decision), *actor, *reason)
				if errors.Is(err, ops.ErrNotFound) {
					return fmt.Errorf("saga %s not found", id)
				}
				if err != nil {
					return err
				}
				if *output == "json" {
					return printJSON(stdout, api.SagaToJSON(s))
				}
				fmt.Fprintf(stdout, "saga %s resolved (%s) by %s: now %s\n", s.ID, *decision, *actor, s.State)
				return nil
			}
		})
	})
}

// sagasJSON is a page of sagas as `server sagas list -o json` prints it: as the API lists them.
func sagasJSON(sagas []*saga.Saga, next string) any {
	out := struct {
		Sagas      []*api.SagaJSON `json:"sagas"`
		NextCursor string          `json:"next_cursor,omitempty"`
	}{Sagas: make([]*api.SagaJSON, len(sagas)), NextCursor: next}
	for i, s := range sagas {
		out.Sagas[i] = api.SagaToJSON(s)
	}
	return out
}

// sagaDetailJSON is a saga as `server sagas show -o json` prints it: the API's, with its history,
// and the order its compensations run in.
func sagaDetailJSON(detail *ops.SagaDetail) any {
	out := struct {
		Saga              *api.SagaJSON `json:"saga"`
		CompensationOrder []int         `json:"compensation_order"`
	}{api.SagaToJSON(detail.Saga), detail.CompensationOrder}
	out.Saga.History = api.SagaHistoryToJSON(detail.History)
	return out
}

// printSagas prints a page of sagas as a table, then how to get the next page.
func printSagas(w io.Writer, sagas []*saga.Saga, next string) error {
	tw := newTable(w, "ID\tTENANT\tNAME\tSTATE\tSTEP\tCREATED\tUPDATED")
	for _, s := range sagas {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", s.ID, s.TenantID, s.Name, s.State, s.CurrentStep+1, s.StepCount,
			s.CreatedAt.Format(time.RFC3339), s.UpdatedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printNext(w, next)
	return nil
}

// printNext says how to get the next page of a listing, if there is one.
func printNext(w io.Writer, next string) {
	if next != "" {
		fmt.Fprintf(w, "more: -after %s\n", next)
	}
}

// printSagaDetail prints a saga: what it is, its steps, the order of its compensations and its
// history.
func printSagaDetail(w io.Writer, d *ops.SagaDetail) error {
	s := d.Saga
	fmt.Fprintf(w, "saga %s (%s) of tenant %s: %s at step %d of %d\n", s.ID, s.Name, s.TenantID, s.State, s.CurrentStep, s.StepCount)
	if s.StartKey != "" {
		fmt.Fprintf(w, "start key: %s\n", s.StartKey)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "error: %s\n", s.Error)
	}
	if s.StuckReason != "" {
		fmt.Fprintf(w, "stuck: %s\n", s.StuckReason)
	}
	fmt.Fprintf(w, "input: %s\ncreated %s, updated %s\n\n", s.Input, s.CreatedAt.Format(time.RFC3339), s.UpdatedAt.Format(time.RFC3339))
	tw := newTable(w, "STEP\tNAME\tSTATE\tEFFECT\tCOMPENSATION\tCOMPENSATIONS\tERROR")
	for _, st := range s.Steps {
		compensation := "-"
		if st.CompensationEffectID != nil {
			compensation = st.CompensationEffectID.String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", st.Index, st.Name, st.State, st.EffectID, compensation, st.CompensationAttempts, st.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	order := make([]string, len(d.CompensationOrder))
	for i, k := range d.CompensationOrder {
		order[i] = fmt.Sprintf("%d (%s)", k, s.Steps[k].Name)
	}
	if len(order) == 0 {
		order = []string{"none"}
	}
	fmt.Fprintf(w, "\ncompensation order: %s\n\n", strings.Join(order, " → "))
	tw = newTable(w, "AT\tFROM\tTO\tSTEP\tACTOR\tREASON")
	for _, h := range d.History {
		from := string(h.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", h.At.Format(time.RFC3339), from, h.To, h.Step, h.Actor, h.Reason)
	}
	return tw.Flush()
}
