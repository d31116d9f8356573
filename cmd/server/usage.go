package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// serverUsage is what `server -h` and `server help` print before the serve flags.
const serverUsage = `usage: server [flags]                      serve the HTTP API until SIGINT or SIGTERM
       server COMMAND ACTION [ID] [flags]  manage the database

commands:
  migrate     the schema: up [-create-db] | down [-steps N | -all] | status
  tenants     create ID [-name N] | list | disable ID | enable ID
  tokens      API tokens: create -tenant T [-name N] [-admin] | create -system [-name N] |
              list -tenant T | list -system | revoke ID
  operators   operator accounts: add -name N -role viewer|operator|admin [-tenants a,b] |
              list [-json] | revoke NAME
  effects     operators' view and actions: list [filters] | show ID | resolve ID -to S -reason R |
              resolve -all [filters] -to S -reason R -dry-run|-yes | cancel ID -reason R |
              redrive ID -reason R | redrive -all [filters] -reason R -dry-run|-yes
  connectors  HTTP connectors: put -f FILE | list [-json] | delete -name NAME |
              operators' limits: limit show [NAME] | limit set NAME [-rate N -per D …] |
              limit clear NAME | limit reset NAME
  sagas       list [filters] [-o json] | show ID | resolve ID -decision D -reason R |
              saga definitions: define -f FILE | definitions [-json]
  runs        show -tenant T ID [-o json] | cancel -tenant T ID -reason R
  events      tail [-pattern P ...] [-after ID] [-tenant T] [-o json]: follow the event stream
  retention   pruning of settled work and old audit history: status [-json] | run [-dry-run] |
              policy set -tenant T -effect-retention D | policy unset -tenant T | policy list |
              partitions [-period day|month] [-premake D]
  events      webhook subscriptions: subscriptions list [-tenant T] | subscriptions create -url U
              [-tenant T] [-pattern P]… | subscriptions delete|pause|resume ID
  schedules   periodic effects: list [-tenant T] [-o json] | set -tenant T NAME -connector C
              (-cron EXPR | -every D) [-args JSON] [-missed skip|catch_up] [-disabled] |
              delete -tenant T NAME
  mcp         an MCP server over stdin and stdout: -token T [-wait D] (docs/mcp.md); serve has /mcp
  version     the version, commit and Go version this binary was built from [-o json]
              (also -version)
  healthcheck [-timeout D] [URL]: GET URL (default the server's /readyz); exit 0 on 2xx, else 1
              (for container health checks; the reactor's containers use it too)
  help        this help; help COMMAND is COMMAND -h

Flags go after the command and its action. ` + "`server COMMAND -h`" + ` describes a command's
actions, ` + "`server COMMAND ACTION -h`" + ` lists an action's flags.

flags of serve:`

// commandNames are server's commands, for the messages that list them.
var commandNames = []string{"migrate", "tenants", "tokens", "operators", "effects", "connectors", "sagas", "runs", "events", "schedules", "retention", "mcp", "version", "healthcheck", "help"}

// helpArgs are the arguments that ask for help.
var helpArgs = []string{"-h", "-help", "--help", "help"}

// newFlagSet returns a flag set that prints nothing by itself: parseFlags prints its usage
// (header, then the flags) to stdout when asked with -h and returns mistakes as errUsage errors,
// which run prints to stderr. An empty header is "usage: NAME [flags]".
func newFlagSet(name, header string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if header == "" {
		header = "usage: " + name + " [flags]\n\nflags:"
	}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fs.SetOutput(stdout)
		defer fs.SetOutput(io.Discard)
		fmt.Fprintln(stdout, header)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs: -h prints fs's usage and returns flag.ErrHelp (exit status 0),
// a mistake returns an errUsage error that names the help to read. Positional arguments are left
// in fs.Args.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // Parse calls it on mistakes too; the usage is printed only when asked for
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	case err != nil:
		return fmt.Errorf("%w: %v (`%s -h` lists the flags)", errUsage, err, fs.Name())
	}
	return nil
}

// parse is parseFlags for commands that take no positional argument.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// splitAction returns a command's action (args[0]) and the arguments after it. With no action it
// returns an errUsage error listing usage; asked for help (-h, -help, --help or help) it prints
// usage to stdout and returns flag.ErrHelp.
func splitAction(command, usage string, args []string, stdout io.Writer) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%w: want one of:\n%s", errUsage, usage)
	}
	if slices.Contains(helpArgs, args[0]) {
		fmt.Fprintf(stdout, "usage:\n%s\n\n`%s ACTION -h` lists an action's flags.\n", usage, command)
		return "", nil, flag.ErrHelp
	}
	return args[0], args[1:], nil
}

// serveArgsError explains the positional arguments serve was given: a command after flags (the
// flags belong after it and its action), or an unknown command.
func serveArgsError(fs *flag.FlagSet) error {
	command := fs.Arg(0)
	if !slices.Contains(commandNames, command) {
		return unknownCommand(command)
	}
	var given []string
	fs.Visit(func(f *flag.Flag) { given = append(given, "-"+f.Name) })
	if len(given) == 0 {
		return fmt.Errorf("%w: %q after \"--\": run `server %s`", errUsage, command, strings.Join(fs.Args(), " "))
	}
	return fmt.Errorf("%w: %s given before %q: flags go after the command and its action, as in `server %s %s …`",
		errUsage, strings.Join(given, ", "), command, strings.Join(fs.Args(), " "), given[0])
}

func unknownCommand(command string) error {
	return fmt.Errorf("%w: unknown command %q: want one of %s, or flags to serve (`server -h` describes them)",
		errUsage, command, strings.Join(commandNames, ", "))
}
