package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/operator"
)

// operatorsUsage is the synopsis of `server operators`.
const operatorsUsage = `server operators add -name N -role viewer|operator|admin [-tenants a,b]   print a new operator's token (shown once)
server operators list [-json]                                            list the operators, revoked ones too
server operators revoke NAME                                             revoke an operator and end its console sessions`

// runOperators: server operators add -name N -role R [-tenants a,b] | list [-json] | revoke NAME.
func runOperators(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server operators", operatorsUsage, args, stdout)
	if err != nil {
		return err
	}
	fs := cmd.fs
	var name, role, tenants *string
	var asJSON *bool
	switch cmd.action {
	case "add":
		name = fs.String("name", "", "the operator's name (required): 1 to 64 letters, digits, '.', '_', '@' or '-'; the audit trail names it")
		role = fs.String("role", "", "viewer (reads), operator (also resolves and cancels) or admin (also manages operators) (required)")
		tenants = fs.String("tenants", "", "comma-separated tenant ids the operator sees and acts on; leave it out for every tenant")
	case "list":
		asJSON = fs.Bool("json", false, "print a JSON array")
	case "revoke":
	default:
		return cmd.unknownAction("operators action")
	}
	if cmd.action == "revoke" {
		// parseWithID would ask for an ID; an operator is revoked by its name.
		if err := parseFlags(fs, cmd.args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return fmt.Errorf("%w: server operators revoke needs the operator's NAME", errUsage)
		}
	}
	revokeName, err := parseWithID(fs, cmd.args, cmd.action == "revoke")
	if err != nil {
		return err
	}
	var parsedRole operator.Role
	var scope []string
	switch cmd.action {
	case "add":
		tenantsGiven := false
		fs.Visit(func(f *flag.Flag) { tenantsGiven = tenantsGiven || f.Name == "tenants" })
		if parsedRole, scope, err = parseOperatorFlags(*name, *role, *tenants, tenantsGiven); err != nil {
			return err
		}
	case "revoke":
		if err := operator.CheckName(revokeName); err != nil {
			return fmt.Errorf("%w: NAME: %v", errUsage, err)
		}
	}
	return cmd.runParsed(ctx, operator.ErrInvalid, func(ctx context.Context, pool *pgxpool.Pool) error {
		store := operator.NewStore(pool)
		switch cmd.action {
		case "add":
			token, op, err := store.Add(ctx, *name, parsedRole, scope)
			if err != nil {
				return err
			}
			// The token goes to stdout alone, for scripts; the rest to stderr.
			fmt.Fprintln(stdout, token)
			fmt.Fprintf(stderr, "added operator %s (%s of %s); its token is printed on stdout and shown only now: store it safely\n",
				op.Name, op.Role, describeScope(op.Tenants))
		case "list":
			operators, err := store.List(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, operators)
			}
			tw := newTable(stdout, "NAME\tROLE\tTENANTS\tPREFIX\tCREATED\tSTATUS")
			for _, op := range operators {
				status := statusColumn("live", "revoked", op.RevokedAt)
				tenants := "all"
				if op.Tenants != nil {
					tenants = strings.Join(op.Tenants, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s…\t%s\t%s\n", op.Name, op.Role, tenants, op.Prefix, op.CreatedAt.UTC().Format(time.RFC3339), status)
			}
			return tw.Flush()
		case "revoke":
			op, err := store.Revoke(ctx, revokeName)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked operator %s (%s of %s): its token is refused and its console sessions ended\n",
				op.Name, op.Role, describeScope(op.Tenants))
		}
		return nil
	})
}

// parseOperatorFlags checks the flags of `operators add` before the database is opened: a mistake
// is a usage error naming the flag. tenants is -tenants, given or not: given, it must list at
// least one tenant (an empty -tenants is refused rather than read as every tenant).
func parseOperatorFlags(name, role, tenants string, tenantsGiven bool) (operator.Role, []string, error) {
	if name == "" {
		return "", nil, fmt.Errorf("%w: -name is required", errUsage)
	}
	if err := operator.CheckName(name); err != nil {
		return "", nil, fmt.Errorf("%w: -name: %v", errUsage, err)
	}
	if role == "" {
		return "", nil, fmt.Errorf("%w: -role is required: viewer, operator or admin", errUsage)
	}
	parsedRole, err := operator.ParseRole(role)
	if err != nil {
		return "", nil, fmt.Errorf("%w: -role: %v", errUsage, err)
	}
	if !tenantsGiven {
		return parsedRole, nil, nil
	}
	if strings.TrimSpace(tenants) == "" {
		return "", nil, fmt.Errorf("%w: -tenants is empty: list tenant ids, or leave -tenants out for every tenant", errUsage)
	}
	scope := strings.Split(tenants, ",")
	for i := range scope {
		scope[i] = strings.TrimSpace(scope[i])
	}
	if err := operator.CheckTenants(scope); err != nil {
		return "", nil, fmt.Errorf("%w: -tenants: %v", errUsage, err)
	}
	return parsedRole, scope, nil
}

// describeScope says which tenants an operator sees: "every tenant", "tenant acme",
// "tenants acme, globex".
func describeScope(tenants []string) string {
	switch len(tenants) {
	case 0:
		return "every tenant"
	case 1:
		return "tenant " + tenants[0]
	default:
		return "tenants " + strings.Join(tenants, ", ")
	}
}
