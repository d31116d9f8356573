// Command demo is the guided tour `make run` starts next to the server and the reactor: a fake
// bank with ambiguous failures, HTTP connectors in front of it, and a handful of wires that go
// through every state of an effect — PENDING → CONFIRMED, PENDING → UNKNOWN → CONFIRMED, a retry,
// a rejection, a duplicate that is compensated, and one that ends STUCK for you to resolve in the
// console (/console on the server) or with curl. It prints every transition as it happens.
//
//	demo -token TOKEN -system-token TOKEN [-server URL] [-reactor URL] [-bank ADDR] [-once]
//
// The token is one of the demo tenant (`server tokens create -tenant demo`), which enqueues and
// reads the effects; the system token (`server tokens create -system`) registers the HTTP
// connector, which every tenant shares. Without -once the demo keeps the bank up and keeps
// printing transitions (your resolutions included) until SIGINT or SIGTERM. Flags default to
// the environment: RECKON_TOKEN, RECKON_SYSTEM_TOKEN, RECKON_SERVER_URL, RECKON_REACTOR_URL,
// RECKON_DEMO_BANK_ADDR.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/reckonhq/reckon/cmd/internal/cli"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.token, "token", cli.Env("RECKON_TOKEN", ""), "API token of the demo tenant (env RECKON_TOKEN; required)")
	fs.StringVar(&cfg.systemToken, "system-token", cli.Env("RECKON_SYSTEM_TOKEN", ""), "system token, to register the demo's HTTP connector (env RECKON_SYSTEM_TOKEN; required)")
	fs.StringVar(&cfg.server, "server", cli.Env("RECKON_SERVER_URL", "http://127.0.0.1:8080"), "base URL of the server (env RECKON_SERVER_URL)")
	fs.StringVar(&cfg.reactor, "reactor", cli.Env("RECKON_REACTOR_URL", "http://127.0.0.1:9090"), "base URL of a reactor's metrics (env RECKON_REACTOR_URL)")
	fs.StringVar(&cfg.bankAddr, "bank", cli.Env("RECKON_DEMO_BANK_ADDR", "127.0.0.1:9091"), "address of the fake bank (env RECKON_DEMO_BANK_ADDR)")
	fs.BoolVar(&cfg.once, "once", false, "exit once every demo effect has settled")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up if the effects have not settled by then")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.token == "" || cfg.systemToken == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "demo: -token (or RECKON_TOKEN) and -system-token (or RECKON_SYSTEM_TOKEN) are required and no arguments are allowed")
		return 2
	}
	if err := demo(ctx, &cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}
