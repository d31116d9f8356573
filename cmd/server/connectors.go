package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/user"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/ops"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/txn"
)

// connectorsUsage is the synopsis of `server connectors`.
const connectorsUsage = `server connectors put -name NAME -dispatch-url URL [-tags write,external] [-status-url URL]
                       [-compensate-url URL] [-business-key-fields a,b] [-timeout 30s] [-max-attempts 5]
                       [-status-check-limit 5] [-backoff-initial 1s] [-backoff-max 5m] [-unsafe]
                       [-async-timeout 10m] [-hard-timeout] [-cancel-url URL] [-description D]
                       [-args-schema JSON] [-tenants a,b]
server connectors put -f definition.json   (or -f - for stdin; the JSON form of docs/connectors.md)
server connectors list [-json]
server connectors delete -name NAME
server connectors limit show|set|clear|reset [NAME] [flags]   operators' limits of any connector (Go or HTTP):
                       ` + "`server connectors limit -h`" + ` describes them
server connectors pause NAME [-tenant T] -reason R    stop every reactor starting its calls (one tenant's with -tenant)
server connectors resume NAME [-tenant T] -reason R   end that pause: its effects go out now
server connectors pauses [-o table|json]              every operator's pause: who, why, since when`

// runConnectors manages the HTTP connectors stored in reckon_connectors (package
// effects/httpconn): put (insert or replace, validated like a Go connector), list and delete.
// Reactors pick changes up at their next sync. limit manages the operators' limits of connectors
// (connectorsLimit); pause, resume and pauses their pauses (connectorsPause).
func runConnectors(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server connectors", connectorsUsage, args, stdout)
	if err != nil {
		return err
	}
	if cmd.action == "limit" {
		return connectorsLimit(ctx, cmd.args, stdout)
	}
	if cmd.action == "pause" || cmd.action == "resume" || cmd.action == "pauses" {
		return connectorsPause(ctx, cmd, stdout)
	}
	fs := cmd.fs
	var run func(context.Context, *pgxpool.Pool) error
	switch cmd.action {
	case "put":
		def, file := connectorFlags(fs)
		run = func(ctx context.Context, db *pgxpool.Pool) error {
			if *file != "" {
				if err := readDefinition(*file, stdin, def, fs); err != nil {
					return err
				}
			}
			var stored httpconn.Definition
			var created bool
			err := txn.Run(ctx, db, nil, func(tx pgx.Tx) (err error) {
				stored, created, err = ops.PutConnector(ctx, tx, def.Definition, ops.Changer{Actor: cliActor()})
				return err
			})
			if err != nil {
				return err
			}
			verb := "updated"
			if created {
				verb = "created"
			}
			fmt.Fprintf(stdout, "%s connector %s (policy %s); reactors pick it up at their next sync\n",
				verb, stored.Name, policyOf(stored))
			return nil
		}
	case "list":
		asJSON := fs.Bool("json", false, "print a JSON array of definitions")
		run = func(ctx context.Context, db *pgxpool.Pool) error {
			defs, err := httpconn.List(ctx, db)
			if err != nil {
				return err
			}
			if *asJSON {
				if defs == nil {
					defs = []httpconn.Definition{}
				}
				return printJSON(stdout, defs)
			}
			printConnectors(stdout, defs)
			return nil
		}
	case "delete":
		name := fs.String("name", "", "the connector to delete (required)")
		run = func(ctx context.Context, db *pgxpool.Pool) error {
			if *name == "" {
				return fmt.Errorf("%w: -name is required", errUsage)
			}
			err := txn.Run(ctx, db, nil, func(tx pgx.Tx) error {
				return ops.DeleteConnector(ctx, tx, *name, ops.Changer{Actor: cliActor()})
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "deleted connector %s; reactors drop it at their next sync\n", *name)
			return nil
		}
	default:
		return cmd.unknownAction("connectors action")
	}
	return cmd.run(ctx, httpconn.ErrInvalid, run)
}

// definitionFlags is a Definition filled from flags.
type definitionFlags struct {
	httpconn.Definition
}

func connectorFlags(fs *flag.FlagSet) (*definitionFlags, *string) {
	d := &definitionFlags{}
	file := fs.String("f", "", "read the definition as JSON from this file (- for stdin); flags given as well override it")
	fs.StringVar(&d.Name, "name", "", "connector name, e.g. bank.wire (required)")
	fs.Func("tags", "comma-separated tags: read, write, idempotent, destructive, external, expensive, network", func(s string) error {
		d.Tags = nil
		for _, tag := range splitList(s) {
			d.Tags = append(d.Tags, effects.Tag(tag))
		}
		return nil
	})
	fs.StringVar(&d.DispatchURL, "dispatch-url", "", "URL of the dispatch calls (required)")
	fs.StringVar(&d.StatusURL, "status-url", "", "URL of the status checks (optional; the best way to resolve UNKNOWN)")
	fs.StringVar(&d.CompensateURL, "compensate-url", "", "URL of the compensations (optional)")
	fs.Func("business-key-fields", "comma-separated args fields that make the business key", func(s string) error {
		d.BusinessKeyFields = splitList(s)
		return nil
	})
	fs.DurationVar(&d.Timeout, "timeout", 0, "timeout of each call (default 30s, at most 5m)")
	fs.IntVar(&d.MaxAttempts, "max-attempts", 0, "dispatch attempts per effect (default 5)")
	fs.IntVar(&d.StatusCheckLimit, "status-check-limit", 0, "inconclusive status checks before STUCK (default 5)")
	fs.DurationVar(&d.BackoffInitial, "backoff-initial", 0, "first retry delay, doubling per attempt (default 1s)")
	fs.DurationVar(&d.BackoffMax, "backoff-max", 0, "longest retry delay (default 5m)")
	fs.BoolVar(&d.Unsafe, "unsafe", false, "allow a non-retry-safe connector with no status check, business key or compensation")
	fs.DurationVar(&d.AsyncTimeout, "async-timeout", 0, "how long an effect accepted upstream (HTTP 202) awaits its callback (default the reactor's -async-timeout; 1ms to 168h)")
	fs.BoolVar(&d.HardTimeout, "hard-timeout", false, "a passed async deadline calls the cancel URL (FAILED once cancelled) instead of only making the outcome UNKNOWN")
	fs.StringVar(&d.CancelURL, "cancel-url", "", "URL that asks the upstream to abandon an accepted operation (hard timeouts, cancelled runs; optional)")
	fs.StringVar(&d.Description, "description", "", "what the connector does, for people and agents (the MCP tool's description; optional)")
	fs.Func("args-schema", "a JSON Schema of the args, with \"type\": \"object\" (checked at every enqueue; the MCP tool's input schema; optional)", func(s string) error {
		if !json.Valid([]byte(s)) {
			return fmt.Errorf("not valid JSON")
		}
		d.ArgsSchema = json.RawMessage(s)
		return nil
	})
	fs.Func("tenants", "comma-separated tenants that alone may use the connector (default every tenant)", func(s string) error {
		d.Tenants = splitList(s)
		return nil
	})
	return d, file
}

// readDefinition reads the JSON definition of file (or stdin for "-") into d; flags given on the
// command line win over the file.
func readDefinition(file string, stdin io.Reader, d *definitionFlags, fs *flag.FlagSet) error {
	raw, err := readFile(file, stdin)
	if err != nil {
		return err
	}
	var fromFile httpconn.Definition
	if err := json.Unmarshal(raw, &fromFile); err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, file, err)
	}
	fromFlags := d.Definition
	d.Definition = fromFile
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name":
			d.Name = fromFlags.Name
		case "tags":
			d.Tags = fromFlags.Tags
		case "dispatch-url":
			d.DispatchURL = fromFlags.DispatchURL
		case "status-url":
			d.StatusURL = fromFlags.StatusURL
		case "compensate-url":
			d.CompensateURL = fromFlags.CompensateURL
		case "business-key-fields":
			d.BusinessKeyFields = fromFlags.BusinessKeyFields
		case "timeout":
			d.Timeout = fromFlags.Timeout
		case "max-attempts":
			d.MaxAttempts = fromFlags.MaxAttempts
		case "status-check-limit":
			d.StatusCheckLimit = fromFlags.StatusCheckLimit
		case "backoff-initial":
			d.BackoffInitial = fromFlags.BackoffInitial
		case "backoff-max":
			d.BackoffMax = fromFlags.BackoffMax
		case "unsafe":
			d.Unsafe = fromFlags.Unsafe
		case "async-timeout":
			d.AsyncTimeout = fromFlags.AsyncTimeout
		case "hard-timeout":
			d.HardTimeout = fromFlags.HardTimeout
		case "cancel-url":
			d.CancelURL = fromFlags.CancelURL
		case "description":
			d.Description = fromFlags.Description
		case "args-schema":
			d.ArgsSchema = fromFlags.ArgsSchema
		case "tenants":
			d.Tenants = fromFlags.Tenants
		}
	})
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func policyOf(def httpconn.Definition) effects.Policy {
	c := def.Connector(nil)
	return effects.PolicyOf(&c)
}

func printConnectors(w io.Writer, defs []httpconn.Definition) {
	if len(defs) == 0 {
		fmt.Fprintln(w, "no HTTP connectors; add one with `server connectors put`")
		return
	}
	tw := newTable(w, "NAME\tPOLICY\tTAGS\tDISPATCH\tSTATUS\tCOMPENSATE\tTIMEOUT\tATTEMPTS\tUPDATED")
	for _, d := range defs {
		tags := make([]string, len(d.Tags))
		for i, tag := range d.Tags {
			tags[i] = string(tag)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%d\t%s\n", d.Name, policyOf(d), orDash(strings.Join(tags, ",")),
			d.DispatchURL, orDash(d.StatusURL), orDash(d.CompensateURL), d.Timeout, d.MaxAttempts,
			d.UpdatedAt.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cliActor names who changes definitions with the CLI in the audit trail: "cli:{OS user}".
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}
