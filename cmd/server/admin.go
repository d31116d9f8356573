package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/cmd/server/internal/tenants"
)

// tenantsUsage is the synopsis of `server tenants`.
const tenantsUsage = `server tenants create ID [-name N]   create a tenant (then: server tokens create -tenant ID)
server tenants list                  list the tenants
server tenants disable ID            refuse the tenant's tokens
server tenants enable ID             accept them again`

// runTenants: server tenants create ID [-name N] | list | disable ID | enable ID.
func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server tenants", tenantsUsage, args, stdout)
	if err != nil {
		return err
	}
	action := cmd.action
	var name *string
	switch action {
	case "create":
		name = cmd.fs.String("name", "", "display name of the tenant")
	case "list", "disable", "enable":
	default:
		return cmd.unknownAction("tenants action")
	}
	id, err := parseWithID(cmd.fs, cmd.args, action != "list")
	if err != nil {
		return err
	}
	return cmd.common.withPool(ctx, 2, func(ctx context.Context, pool *pgxpool.Pool) error {
		switch action {
		case "create":
			tenant, err := tenants.Create(ctx, pool, id, *name)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "created tenant %s\n", tenant.ID)
		case "list":
			tenants, err := tenants.List(ctx, pool)
			if err != nil {
				return err
			}
			tw := newTable(stdout, "ID\tNAME\tCREATED\tSTATUS")
			for _, t := range tenants {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339), statusColumn("enabled", "disabled", t.DisabledAt))
			}
			return tw.Flush()
		case "disable", "enable":
			if _, err := tenants.SetDisabled(ctx, pool, id, action == "disable"); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%sd tenant %s\n", action, id)
		}
		return nil
	})
}

// tokensUsage is the synopsis of `server tokens`.
const tokensUsage = `server tokens create -tenant T [-name N] [-admin]   print a new API token of tenant T (shown once)
server tokens create -system [-name N]              print a new system token (shown once)
server tokens list -tenant T | -system              list T's tokens, or the system tokens
server tokens revoke ID                             revoke a token`

// runTokens: server tokens create -tenant T [-name N] [-admin] | create -system [-name N] |
// list -tenant T | list -system | revoke ID.
func runTokens(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, err := newCommand("server tokens", tokensUsage, args, stdout)
	if err != nil {
		return err
	}
	action, fs := cmd.action, cmd.fs
	var tenant, name *string
	var admin, system *bool
	switch action {
	case "create":
		tenant = fs.String("tenant", "", "tenant of the token (this or -system is required)")
		system = fs.Bool("system", false, "a system token: no tenant; it alone changes what all tenants share (HTTP connectors, saga definitions) and any tenant's turn handler")
		name = fs.String("name", "", "what the token is for; written to the audit trail of its actions")
		admin = fs.Bool("admin", false, "the tenant's token may also manage the tenant's turn handler")
	case "list":
		tenant = fs.String("tenant", "", "tenant whose tokens to list (this or -system is required)")
		system = fs.Bool("system", false, "list the system tokens")
	case "revoke":
	default:
		return cmd.unknownAction("tokens action")
	}
	rawID, err := parseWithID(fs, cmd.args, action == "revoke")
	if err != nil {
		return err
	}
	switch {
	case tenant == nil:
	case *tenant == "" && !*system:
		return fmt.Errorf("%w: -tenant T or -system is required", errUsage)
	case *tenant != "" && *system:
		return fmt.Errorf("%w: -tenant and -system exclude each other: a system token has no tenant", errUsage)
	case admin != nil && *admin && *system:
		return fmt.Errorf("%w: -admin and -system exclude each other: -admin is for a tenant's token, and a system token has no tenant", errUsage)
	}
	var id uuid.UUID
	if action == "revoke" {
		if id, err = uuid.Parse(rawID); err != nil {
			return fmt.Errorf("%w: token id %q is not a UUID", errUsage, rawID)
		}
	}
	return cmd.common.withPool(ctx, 2, func(ctx context.Context, pool *pgxpool.Pool) error {
		switch action {
		case "create":
			var secret string
			var token *tenants.Token
			var err error
			if *system {
				secret, token, err = tenants.CreateSystemToken(ctx, pool, *name)
			} else {
				secret, token, err = tenants.CreateToken(ctx, pool, *tenant, &tenants.TokenOpts{Name: *name, Admin: *admin})
			}
			if err != nil {
				return err
			}
			// The token goes to stdout alone, for scripts; the rest to stderr, labeled so that the
			// token's id is not taken for the token.
			fmt.Fprintln(stdout, secret)
			fmt.Fprintf(stderr, "created %s, printed on stdout and shown only now: store it safely (its id, for `tokens list` and `tokens revoke`: %s)\n",
				describeToken(token), token.ID)
		case "list":
			var tokens []*tenants.Token
			var err error
			if *system {
				tokens, err = tenants.ListSystemTokens(ctx, pool)
			} else {
				tokens, err = tenants.ListTokens(ctx, pool, *tenant)
			}
			if err != nil {
				return err
			}
			tw := newTable(stdout, "ID\tPREFIX\tNAME\tCREATED\tSTATUS")
			for _, t := range tokens {
				status := statusColumn("live", "revoked", t.RevokedAt)
				switch {
				case t.System:
					status += " (system)"
				case t.Admin:
					status += " (admin)"
				}
				fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\n", t.ID, t.Prefix, t.Name, t.CreatedAt.UTC().Format(time.RFC3339), status)
			}
			return tw.Flush()
		case "revoke":
			token, err := tenants.RevokeToken(ctx, pool, id)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked token %s: %s\n", token.ID, describeToken(token))
		}
		return nil
	})
}

// describeToken names what kind of token t is: "a system token", "an API admin token of tenant
// acme", "an API token of tenant acme".
func describeToken(t *tenants.Token) string {
	switch {
	case t.System:
		return "a system token"
	case t.Admin:
		return "an API admin token of tenant " + t.TenantID
	default:
		return "an API token of tenant " + t.TenantID
	}
}

// parseWithID parses flags around one positional ID argument (required when wantID, forbidden
// otherwise). Flags may come before or after the ID.
func parseWithID(fs *flag.FlagSet, args []string, wantID bool) (string, error) {
	id, err := parseWithArg(fs, args)
	switch {
	case err != nil:
		return "", err
	case wantID && id == "":
		return "", fmt.Errorf("%w: %s needs an ID", errUsage, fs.Name())
	case !wantID && id != "":
		return "", fmt.Errorf("%w: unexpected argument %q", errUsage, id)
	}
	return id, nil
}

// parseWithArg parses flags around at most one positional argument, which it returns ("" when
// there is none). Flags may come before or after it.
func parseWithArg(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil || fs.NArg() == 0 {
		return "", err
	}
	arg := fs.Arg(0)
	return arg, parse(fs, fs.Args()[1:])
}
