package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/cmd/internal/cli"
	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/turns/httpturn"
)

// config is the reactor's configuration: every flag defaults to an environment variable, which
// defaults to the value given here.
type config struct {
	databaseURL    string
	schema         string
	logFormat      string
	logLevel       string
	addr           string
	id             string
	queue          string
	workers        int
	dbConns        int
	shutdown       time.Duration
	inFlightMargin time.Duration
	sweepInterval  time.Duration
	syncInterval   time.Duration
	fetchPoll      time.Duration
	fetchCooldown  time.Duration
	// claimInterval is effects.Config.ClaimInterval: how often a woken claimer gives the effects
	// enqueued one at a time their shared dispatch jobs.
	claimInterval time.Duration
	// livenessInterval, takeoverGrace and heartbeatTimeout are effects.Config's: how this reactor
	// shows it lives and when it takes a dead reactor's jobs over (docs/design.md).
	livenessInterval time.Duration
	takeoverGrace    time.Duration
	heartbeatTimeout time.Duration
	// asyncTimeout is effects.Config.AsyncTimeout: the await of accepted effects whose spec and
	// connector name none.
	asyncTimeout time.Duration
	// statsInterval is effects.Config.StatsInterval: how often the shared statistics are computed
	// (by one reactor of the fleet).
	statsInterval time.Duration
	// turnHandlerURL is where the HTTP turn handler POSTs turns; empty: turns wait for a reactor
	// that has one.
	turnHandlerURL     string
	turnHandlerTimeout time.Duration
	turnNotReadyDelay  time.Duration
	// retention is the retention job's settings (package retention): how long settled work and the
	// audit history are kept, and how often this reactor (when leader) prunes.
	retention cli.RetentionFlags
	// confirmation is effects.Config's confirmation-hold settings of the effects this reactor
	// enqueues (turns, sagas): -require-irreversible-confirmation, -confirmation-ttl, -four-eyes.
	confirmation cli.ConfirmationFlags
	// version (-version): print the version and exit, whatever else is configured.
	version bool
}

// parseConfig reads flags over environment variables. A bad value is an error naming it.
func parseConfig(fs *flag.FlagSet, args []string) (*config, error) {
	c := &config{}
	env := cli.EnvFlags{FlagSet: fs}
	fs.StringVar(&c.databaseURL, "database-url", cli.Env("DATABASE_URL", cli.DefaultDatabaseURL), "Postgres connection string (env DATABASE_URL)")
	fs.StringVar(&c.schema, "schema", cli.Env("RECKON_SCHEMA", "public"), cli.SchemaFlagUsage)
	fs.StringVar(&c.logFormat, "log-format", cli.Env("RECKON_LOG_FORMAT", "text"), "log format: text or json (env RECKON_LOG_FORMAT)")
	fs.StringVar(&c.logLevel, "log-level", cli.Env("RECKON_LOG_LEVEL", cli.DefaultLogLevel), "least severe records logged: debug, info, warn or error (env RECKON_LOG_LEVEL)")
	fs.StringVar(&c.addr, "addr", cli.Env("RECKON_REACTOR_ADDR", "127.0.0.1:9090"), "address of /healthz, /readyz and /metrics (env RECKON_REACTOR_ADDR)")
	fs.StringVar(&c.id, "id", cli.Env("RECKON_REACTOR_ID", ""), "name of this reactor in the audit trail and to River; unique per process (env RECKON_REACTOR_ID; default host-pid-random)")
	fs.StringVar(&c.queue, "queue", cli.Env("RECKON_QUEUE", "reckon"), "River queue of Reckon's jobs; every reactor and enqueuer of one deployment must agree (env RECKON_QUEUE)")
	env.IntVar(&c.workers, "workers", "RECKON_WORKERS", 50, "jobs worked on at once (a dispatch job of effects enqueued together calls them concurrently)")
	env.IntVar(&c.dbConns, "db-conns", "RECKON_DB_CONNS", 20, "database connections; River's listener, fetches, reads and group commits share them")
	env.DurationVar(&c.shutdown, "shutdown-timeout", "RECKON_SHUTDOWN_TIMEOUT", 30*time.Second,
		"how long work in flight may take to finish after SIGTERM; then it is cancelled, recorded as UNKNOWN and reconciled later")
	env.DurationVar(&c.inFlightMargin, "in-flight-margin", "RECKON_IN_FLIGHT_MARGIN", 30*time.Second,
		"how long past its call timeout an attempt may run before the sweeper presumes its worker dead")
	env.DurationVar(&c.sweepInterval, "sweep-interval", "RECKON_SWEEP_INTERVAL", 5*time.Second,
		"how often to look for effects whose attempt or job is gone")
	env.DurationVar(&c.livenessInterval, "liveness-interval", "RECKON_LIVENESS_INTERVAL", time.Second,
		"how often this reactor writes its heartbeat and looks for dead reactors whose running jobs it hands back to River")
	env.DurationVar(&c.takeoverGrace, "takeover-grace", "RECKON_TAKEOVER_GRACE", 2*time.Second,
		"how long a reactor's liveness lock must stay free before its jobs are taken over (covers a reconnect after a Postgres restart); 0 takes over at once")
	env.DurationVar(&c.heartbeatTimeout, "heartbeat-timeout", "RECKON_HEARTBEAT_TIMEOUT", 30*time.Second,
		"how long a reactor may go without a heartbeat before the others end its database connection and take its jobs over (a host that vanished)")
	env.DurationVar(&c.syncInterval, "connector-sync-interval", "RECKON_CONNECTOR_SYNC_INTERVAL", 10*time.Second,
		"how often to reload the HTTP connectors and the saga definitions from the database")
	env.DurationVar(&c.fetchPoll, "fetch-poll-interval", "RECKON_FETCH_POLL_INTERVAL", 0,
		"how often River polls for jobs when no notification arrives (default River's, 1s)")
	env.DurationVar(&c.fetchCooldown, "fetch-cooldown", "RECKON_FETCH_COOLDOWN", 0,
		"shortest time between two fetches (default River's, 100ms)")
	env.DurationVar(&c.claimInterval, "claim-interval", "RECKON_CLAIM_INTERVAL", 10*time.Millisecond,
		"how often a woken claimer gives the effects enqueued one at a time their dispatch jobs, shared by those waiting then (docs/design.md, Claiming); 1ms to 1s")
	env.DurationVar(&c.asyncTimeout, "async-timeout", "RECKON_ASYNC_TIMEOUT", effects.DefaultAsyncTimeout,
		"how long an effect whose dispatch was accepted upstream (HTTP 202) awaits its callback when neither the effect nor its connector says (async_timeout_ms); 1ms to 168h")
	env.DurationVar(&c.statsInterval, "stats-interval", "RECKON_STATS_INTERVAL", 15*time.Second,
		"how often the shared statistics behind reckon_effects, the queue lag and reckon_sagas are computed, by one reactor for the whole fleet; 100ms to 1h")
	fs.StringVar(&c.turnHandlerURL, "turn-handler-url", cli.Env("RECKON_TURN_HANDLER_URL", ""),
		"URL of the HTTP turn handler of the tenants without their own (PUT /v1/turn-handlers/{tenant}): each logical turn is POSTed there and the effects it answers are committed with the turn (docs/turns.md); empty: their turns wait (env RECKON_TURN_HANDLER_URL)")
	env.DurationVar(&c.turnHandlerTimeout, "turn-handler-timeout", "RECKON_TURN_HANDLER_TIMEOUT", 30*time.Second,
		"how long one call to the turn handler may take; a timeout attempts the turn again")
	env.DurationVar(&c.turnNotReadyDelay, "turn-not-ready-delay", "RECKON_TURN_NOT_READY_DELAY", 30*time.Second,
		"how long the turn job of a tenant without a turn handler waits before it is offered again")
	c.retention.Register(&env)
	c.retention.RegisterInterval(&env)
	c.confirmation.Register(&env)
	fs.BoolVar(&c.version, "version", false, "print the version, as reactor version does, and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.version {
		return c, nil // neither the environment nor the other flags matter
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := env.Err(); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func (c *config) validate() error {
	cooldown := c.fetchCooldown
	if cooldown == 0 {
		cooldown = riverDefaultFetchCooldown
	}
	switch {
	case c.fetchPoll > 0 && c.fetchPoll < cooldown:
		return fmt.Errorf("-fetch-poll-interval %v must not be shorter than the fetch cooldown %v (-fetch-cooldown)", c.fetchPoll, cooldown)
	case c.workers < 1 || c.workers > 10_000:
		return fmt.Errorf("-workers must be between 1 and 10000, got %d", c.workers)
	case c.dbConns < 4:
		return fmt.Errorf("-db-conns at least 4 are needed, got %d", c.dbConns)
	case c.shutdown <= 0:
		return fmt.Errorf("-shutdown-timeout must be positive, got %v", c.shutdown)
	case c.inFlightMargin <= 0 || c.sweepInterval <= 0 || c.syncInterval <= 0:
		return errors.New("-in-flight-margin, -sweep-interval and -connector-sync-interval must be positive")
	case c.fetchPoll < 0 || c.fetchCooldown < 0:
		return errors.New("-fetch-poll-interval and -fetch-cooldown must not be negative")
	case c.livenessInterval <= 0 || c.livenessInterval > time.Minute:
		return fmt.Errorf("-liveness-interval must be between 1ms and 1m, got %v", c.livenessInterval)
	case c.takeoverGrace < 0 || c.takeoverGrace > 10*time.Minute:
		return fmt.Errorf("-takeover-grace must be between 0 and 10m, got %v", c.takeoverGrace)
	case c.heartbeatTimeout < 2*max(c.livenessInterval, time.Second) || c.heartbeatTimeout > 24*time.Hour:
		return fmt.Errorf("-heartbeat-timeout must be between twice -liveness-interval (at least 2s) and 24h, got %v", c.heartbeatTimeout)
	case c.queue == "":
		return errors.New("-queue must not be empty")
	case c.turnHandlerTimeout <= 0 || c.turnNotReadyDelay <= 0:
		return errors.New("-turn-handler-timeout and -turn-not-ready-delay must be positive")
	case c.asyncTimeout < time.Millisecond || c.asyncTimeout > effects.MaxAsyncTimeout:
		return fmt.Errorf("-async-timeout must be between 1ms and %v, got %v", effects.MaxAsyncTimeout, c.asyncTimeout)
	case c.claimInterval < time.Millisecond || c.claimInterval > time.Second:
		return fmt.Errorf("-claim-interval must be between 1ms and 1s, got %v", c.claimInterval)
	case c.statsInterval < 100*time.Millisecond || c.statsInterval > time.Hour:
		return fmt.Errorf("-stats-interval must be between 100ms and 1h, got %v", c.statsInterval)
	}
	if err := errors.Join(cli.CheckSchema(c.schema), c.retention.Validate(), c.confirmation.Validate()); err != nil {
		return err
	}
	if c.turnHandlerURL != "" {
		if err := httpturn.ValidateURL(c.turnHandlerURL); err != nil {
			return fmt.Errorf("-turn-handler-url: %w", err)
		}
	}
	return nil
}

// riverDefaultFetchCooldown is River's FetchCooldown when none is set.
const riverDefaultFetchCooldown = 100 * time.Millisecond
