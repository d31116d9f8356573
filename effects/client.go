package effects

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/conf"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/service"
	"github.com/reckonhq/reckon/internal/txn"
)

// Client enqueues, dispatches, reconciles and inspects effects. Every process that records effects
// has one; a process that also runs the workers (a reactor) calls Start. It is safe for concurrent
// use.
type Client struct {
	config    Config
	pool      *pgxpool.Pool
	queries   *dbsqlc.Queries
	registry  *Registry
	logger    *slog.Logger
	metrics   *metrics
	tracing   *tracing
	river     *river.Client[pgx.Tx]
	notifier  *notifier
	committer *committer
	loader    *loader
	limits    *limiter   // the limits' view (limit.go)
	fatal     chan error // Fatal

	claimNotifier claimNotifier // enqueues' notifications of the claimers (claim.go)

	hooks map[string]SettleHook // by owner, from the plugins; fixed once NewClient returns
	stats []statsPart           // the parts of the shared statistics, effects' and the plugins'; fixed once NewClient returns

	statsEnsured map[string]bool // parts whose row exists (stats.go); used by Start and its loop, one at a time

	callbackKey callbackKey // the deployment's, for CallbackSecret

	mu       sync.Mutex
	started  bool
	services service.List // the background work of a started client (lifecycle.go); made by NewClient
}

// Config configures a Client. Registry is required; every other field has a default.
type Config struct {
	// Registry holds the connectors. Required.
	Registry *Registry
	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the client's Prometheus metrics. Default: none (not exported).
	Registerer prometheus.Registerer
	// Queue is the River queue of Reckon's jobs. Default "reckon".
	Queue string
	// ID names this process in the audit trail and to River. Default: host name, pid and a random
	// suffix.
	ID string
	// Workers is how many dispatch jobs (and other jobs) a started client works on at once.
	// Default 50. A dispatch job carries one effect, or up to DispatchBatch effects enqueued
	// together, which it calls concurrently: up to Workers × DispatchBatch calls may be in flight.
	Workers int
	// DispatchBatch is how many effects share a dispatch job: effects enqueued in one
	// EnqueueManyTx, and effects enqueued one at a time that a claimer claims together (see
	// ClaimInterval). Default 16; 1 gives every effect a job of its own.
	DispatchBatch int
	// ClaimInterval paces the claimer of a started client. An effect enqueued on its own (EnqueueTx
	// without ScheduledAt) is written without a dispatch job; the claimers of its queue give it one,
	// shared with the other effects waiting then (up to DispatchBatch per job), in a transaction
	// that inserts the jobs and stamps the effects (docs/design.md, "Claiming"). The enqueue wakes
	// the claimers with a notification, at most one per ClaimInterval per enqueuing client; a woken
	// claimer claims every ClaimInterval until it twice finds nothing, then waits for the next
	// notification or FetchPollInterval. Shorter: lower latency under load, smaller batches.
	// Default 10ms; 1ms to 1s.
	ClaimInterval time.Duration
	// InFlightMargin is how long past its call timeout an attempt may run before the sweeper
	// presumes its worker dead and makes the effect UNKNOWN. Default 30s.
	InFlightMargin time.Duration
	// SweepInterval is how often a started client looks for effects whose attempt or job is gone.
	// Default 5s.
	SweepInterval time.Duration
	// LivenessInterval is how often a started client writes its heartbeat and looks for dead
	// reactors — reactors that River says run jobs of Queue but whose liveness lock Postgres has
	// freed — to hand their running jobs back to River. Default 1s.
	LivenessInterval time.Duration
	// TakeoverGrace is how long a reactor's liveness lock must stay free before its jobs are taken
	// over: long enough for a live reactor to get its lock back after its connection dropped (a
	// Postgres restart). With the defaults a dead reactor's jobs run again within about
	// LivenessInterval × 2 + TakeoverGrace (4s). Default 2s; a negative value takes over at the
	// first sight of a free lock.
	TakeoverGrace time.Duration
	// HeartbeatTimeout is how long a reactor may go without writing its heartbeat before the
	// others end its database connection, which frees its lock (and its jobs are then taken over).
	// It covers a host that vanished: its connection, and so its lock, would otherwise stay open on
	// the server until TCP keepalives notice, hours by default. Default 30s.
	HeartbeatTimeout time.Duration
	// FetchCooldown and FetchPollInterval tune River's fetching (see river.Config). Defaults:
	// River's.
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	// AsyncTimeout is how long an effect accepted upstream (Accepted) awaits its callback when
	// neither its Spec nor its Connector says. Default DefaultAsyncTimeout.
	AsyncTimeout time.Duration
	// RequireIrreversibleConfirmation holds every effect of an irreversible connector (PolicyOf)
	// until a person confirms it, as Connector.RequiresConfirmation does (docs/design.md,
	// "Confirmation holds").
	RequireIrreversibleConfirmation bool
	// ConfirmationTTL is how long a held effect awaits its confirmation when its Spec does not
	// say; then it is FAILED ("confirmation expired"). 0: no expiry.
	ConfirmationTTL time.Duration
	// FourEyes makes the effects this client holds for confirmation refuse a confirmation by the
	// actor that enqueued them. The rule is kept with each effect, so every process that may
	// confirm it applies it.
	FourEyes bool
	// JobRetention is how long River keeps the completed and cancelled jobs of this client's River
	// client before its job cleaner (run by the leader) deletes them; discarded jobs (a job that
	// failed every attempt, worth a look) are kept max(JobRetention, 7 days). A job is only the
	// vehicle of an effect: the effect's row and its transitions are its record, and a retention
	// run prunes those (package retention). Default 0: River's own periods, 24h for completed and
	// cancelled jobs, 7 days for discarded ones. cmd/reactor sets min(24h, -effect-retention).
	JobRetention time.Duration
	// StatsInterval is how often the shared statistics are computed — the counts behind the gauges
	// read from the database (reckon_effects, reckon_effects_oldest_pending_seconds, reckon_sagas):
	// once per interval by one started client of the whole fleet, whichever claims them first, and
	// stored in reckon_stats, where every client with a Registerer reads them at scrape time (see
	// docs/design.md, "Shared statistics"). Start computes those that are due before it returns.
	// Default 15s; 100ms to 1h; a negative value: this client never computes them (it still
	// reports them).
	StatsInterval time.Duration
	// Plugins extend the client as it is built: the packages built on effects (turns.Client,
	// saga.Client) and an application's own settle hooks (OnSettle). NewClient installs them in
	// order; see Plugin. Default: none.
	Plugins []Plugin
	// TracerProvider makes the client's OpenTelemetry spans: reckon.enqueue as a child of the
	// caller's span, then, in the trace it stored on the effect, reckon.dispatch, the connector's
	// call, reckon.reconcile and the rest, and a span "river.work {kind}" per River job (see
	// docs/design.md, "Tracing"). Default otel.GetTracerProvider(), the global provider, which
	// records nothing until the application (or cmd/server and cmd/reactor, from the OTEL_*
	// variables) installs an SDK: tracing off costs next to nothing and stores nothing.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context of the span that enqueues an effect onto its row
	// (reckon_effects.trace_context) and into its River jobs' metadata, and reads it back when they
	// are worked. Default: W3C Trace Context and Baggage (propagation.TraceContext,
	// propagation.Baggage), whatever the global propagator is.
	Propagator propagation.TextMapPropagator
	// RiverMiddleware is added to the River client's middleware (river.Config.Middleware) after
	// Reckon's own (which writes and continues the trace context): each entry a
	// rivertype.JobInsertMiddleware, run around the inserts of jobs through this client, a
	// rivertype.WorkerMiddleware, run around the work of every job it works (Reckon's included), or
	// both. Embed river.MiddlewareDefaults. Default: none.
	RiverMiddleware []rivertype.Middleware
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Queue == "" {
		c.Queue = "reckon"
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		c.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(suffix))
	}
	if c.Workers == 0 {
		c.Workers = 50
	}
	if c.DispatchBatch == 0 {
		c.DispatchBatch = 16
	}
	if c.ClaimInterval == 0 {
		c.ClaimInterval = 10 * time.Millisecond
	}
	if c.InFlightMargin == 0 {
		c.InFlightMargin = 30 * time.Second
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.LivenessInterval == 0 {
		c.LivenessInterval = time.Second
	}
	if c.TakeoverGrace == 0 {
		c.TakeoverGrace = 2 * time.Second
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 30 * time.Second
	}
	if c.AsyncTimeout == 0 {
		c.AsyncTimeout = DefaultAsyncTimeout
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = 15 * time.Second
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = defaultPropagator()
	}
}

// Validate reports what is wrong with the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Registry == nil:
		return errors.New("effects: Config.Registry is required")
	case c.Workers < 1 || c.Workers > 10_000:
		return fmt.Errorf("effects: Config.Workers must be between 1 and 10000, got %d", c.Workers)
	case c.DispatchBatch < 1 || c.DispatchBatch > 1000:
		return fmt.Errorf("effects: Config.DispatchBatch must be between 1 and 1000, got %d", c.DispatchBatch)
	case c.ConfirmationTTL < 0 || (c.ConfirmationTTL > 0 && (c.ConfirmationTTL < time.Second || c.ConfirmationTTL > MaxConfirmationTTL)):
		return fmt.Errorf("effects: Config.ConfirmationTTL must be between 1s and %v, or 0 for none, got %v", MaxConfirmationTTL, c.ConfirmationTTL)
	case c.ClaimInterval < time.Millisecond || c.ClaimInterval > time.Second:
		return fmt.Errorf("effects: Config.ClaimInterval must be between 1ms and 1s, got %v", c.ClaimInterval)
	case c.InFlightMargin < 0 || c.SweepInterval < 0:
		return errors.New("effects: Config.InFlightMargin and SweepInterval must not be negative")
	case c.LivenessInterval < 0 || c.LivenessInterval > time.Minute:
		return fmt.Errorf("effects: Config.LivenessInterval must be between 0 (the default) and 1m, got %v", c.LivenessInterval)
	case c.TakeoverGrace > 10*time.Minute:
		return fmt.Errorf("effects: Config.TakeoverGrace must be at most 10m, got %v", c.TakeoverGrace)
	case c.HeartbeatTimeout != 0 && (c.HeartbeatTimeout < 2*max(c.LivenessInterval, time.Second) || c.HeartbeatTimeout > 24*time.Hour):
		return fmt.Errorf("effects: Config.HeartbeatTimeout must be between twice LivenessInterval (at least 2s) and 24h, got %v", c.HeartbeatTimeout)
	case c.JobRetention < 0:
		return fmt.Errorf("effects: Config.JobRetention must not be negative, got %v", c.JobRetention)
	case c.AsyncTimeout < 0 || c.AsyncTimeout > MaxAsyncTimeout:
		return fmt.Errorf("effects: Config.AsyncTimeout %v out of range (up to %v)", c.AsyncTimeout, MaxAsyncTimeout)
	case c.StatsInterval > 0 && (c.StatsInterval < 100*time.Millisecond || c.StatsInterval > time.Hour):
		return fmt.Errorf("effects: Config.StatsInterval must be between 100ms and 1h (negative: never computed here), got %v", c.StatsInterval)
	}
	for i, m := range c.RiverMiddleware {
		_, inserts := m.(rivertype.JobInsertMiddleware)
		_, works := m.(rivertype.WorkerMiddleware)
		switch {
		case m == nil:
			return fmt.Errorf("effects: Config.RiverMiddleware[%d] is nil", i)
		case !inserts && !works:
			return fmt.Errorf("effects: Config.RiverMiddleware[%d] (%T) is neither a rivertype.JobInsertMiddleware nor a rivertype.WorkerMiddleware", i, m)
		}
	}
	return nil
}

// NewClient returns a Client on pool. It does not start workers: see Start.
func NewClient(pool *pgxpool.Pool, config *Config) (*Client, error) {
	cfg, err := conf.Resolve(config, (*Config).setDefaults)
	if err != nil {
		return nil, err
	}
	c := &Client{
		config:   cfg,
		pool:     pool,
		queries:  dbsqlc.New(pool),
		loader:   newLoader(dbsqlc.New(pool)),
		notifier: newNotifier(pool, cfg.Logger),
		limits:   newLimiter(pool, cfg.Logger, cfg.Workers),
		registry: cfg.Registry,
		logger:   cfg.Logger,
		fatal:    make(chan error, 1),
		hooks:    map[string]SettleHook{},
		tracing:  newTracing(cfg.TracerProvider, cfg.Propagator),
	}
	c.committer = newCommitter(c)
	c.claimNotifier.every = cfg.ClaimInterval
	c.stats = []statsPart{{name: StatsPartEffects, compute: computeEffectsStats}}
	c.statsEnsured = map[string]bool{}
	metrics, err := newMetrics(cfg.Registerer, c)
	if err != nil {
		return nil, err
	}
	c.metrics = metrics

	host := &PluginHost{client: c, workers: river.NewWorkers(), queues: map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Workers}}}
	for _, err := range []error{
		AddWorker(host, &dispatchWorker{effectWorker[dispatchArgs]{client: c}}),
		AddWorker(host, &reconcileWorker{effectWorker[reconcileArgs]{client: c}}),
		AddWorker(host, &deadlineWorker{effectWorker[deadlineArgs]{client: c}}),
	} {
		if err != nil {
			return nil, err
		}
	}
	for i, plugin := range cfg.Plugins {
		if plugin == nil {
			return nil, fmt.Errorf("effects: Config.Plugins[%d] is nil", i)
		}
		if err := plugin.Install(host); err != nil {
			return nil, fmt.Errorf("effects: install plugin %T: %w", plugin, err)
		}
	}
	riverClient, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:                c.config.ID,
		Logger:            c.logger,
		Queues:            host.queues,
		Workers:           host.workers,
		PeriodicJobs:      host.periodic,
		FetchCooldown:     cfg.FetchCooldown,
		FetchPollInterval: cfg.FetchPollInterval,
		// 0 leaves River's defaults (24h, 24h, 7 days).
		CompletedJobRetentionPeriod: cfg.JobRetention,
		CancelledJobRetentionPeriod: cfg.JobRetention,
		DiscardedJobRetentionPeriod: discardedJobRetention(cfg.JobRetention),
		// Our workers bound their own time (Timeout per job). A dead reactor's running jobs are
		// handed back within seconds by the liveness takeover (liveness.go); River's rescue is
		// left for jobs of River clients that are not registered reactors.
		RescueStuckJobsAfter: maxTimeout + time.Hour,
		MaxAttempts:          25,
		// Ours first, so that the users' middleware runs inside the job's span.
		Middleware: append([]rivertype.Middleware{&tracingMiddleware{tracing: c.tracing}}, cfg.RiverMiddleware...),
	})
	if err != nil {
		return nil, fmt.Errorf("effects: river client: %w", err)
	}
	c.river = riverClient
	c.services.Add(c.newServices()...)
	c.services.Add(host.services...)
	return c, nil
}

// riverDiscardedJobRetention is River's default DiscardedJobRetentionPeriod.
const riverDiscardedJobRetention = 7 * 24 * time.Hour

// discardedJobRetention is how long River keeps discarded jobs for Config.JobRetention: never less
// than River's default, 0 (River's default) when JobRetention is.
func discardedJobRetention(jobRetention time.Duration) time.Duration {
	if jobRetention == 0 {
		return 0
	}
	return max(jobRetention, riverDiscardedJobRetention)
}

// TracerProvider returns the provider of the client's spans (Config.TracerProvider), for the
// packages built on effects to make theirs in the same traces.
func (c *Client) TracerProvider() trace.TracerProvider { return c.config.TracerProvider }

// Queue returns the River queue the client's workers work (Config.Queue).
func (c *Client) Queue() string { return c.config.Queue }

// Registry returns the client's connector registry.
func (c *Client) Registry() *Registry { return c.registry }

// ID returns the name this client writes into the audit trail.
func (c *Client) ID() string { return c.config.ID }

// Start runs the reactor: River's workers, the claimer, the sweeper, the reactor's liveness (a lock
// and a heartbeat by which other reactors know it lives, and the takeover of dead reactors' jobs;
// see Config.LivenessInterval) and the plugins' services (PluginHost.AddService). It returns once
// they are running; Stop ends them. It fails if a live process uses the same Config.ID; a failed
// Start stops what it started and may be called again. Cancelling ctx is a hard stop — River
// cancels the work in flight at once — so a process that wants to drain on SIGTERM passes a
// context that the signal does not cancel and calls Stop (cmd/reactor does). A stopped client may
// be started again.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return errors.New("effects: client already started")
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	// The callback key, read now rather than by the first calls, which would wait for it between
	// their grants and their sends (a rate's calls granted apart then go out together).
	if _, err := c.callbackKey.get(ctx, c); err != nil {
		return err
	}
	if err := c.services.Start(ctx); err != nil {
		c.notifier.stop() // a failed Start leaves no connection behind
		return err
	}
	c.started = true
	c.logger.InfoContext(ctx, "reactor started", slog.String("reactor_id", c.config.ID),
		slog.String("queue", c.config.Queue), slog.Int("workers", c.config.Workers))
	return nil
}

// Stop ends the reactor gracefully: the plugins' services and the claimer end, no new work is
// fetched, and work in flight finishes. If ctx ends first, work in flight is cancelled: a cancelled
// call is recorded as UNKNOWN and reconciled later, so nothing is lost. Stop also ends the listener
// of Wait and Listen; call it even on a client that was never started if it used them. A second
// Stop does nothing more.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	wasStarted := c.started
	c.started = false
	err := c.services.Stop(ctx) // nothing if not started
	// Last, once nothing started can subscribe anymore.
	c.notifier.stop()
	if err != nil {
		return fmt.Errorf("effects: stop: %w", err)
	}
	if wasStarted {
		c.logger.Info("reactor stopped", slog.String("reactor_id", c.config.ID))
	}
	return nil
}

// Fatal delivers ErrPresumedDead if the started client had to stop its work on its own: it lost
// its database connection for longer than Config.TakeoverGrace, and another reactor took it for
// dead and handed its running jobs to others. Its River client is stopped by then; the process
// should call Stop and exit so that it is restarted (cmd/reactor exits with status 1).
func (c *Client) Fatal() <-chan error { return c.fatal }

// withTx runs fn in a transaction on the pool (txn.Run): committed if fn returns nil, rolled back
// otherwise, and run again from the start when Postgres aborts it as a deadlock victim or for a
// serialization failure, so fn must only write through tx. Otherwise an outcome already obtained
// from an upstream — a deadlock between a settle hook and an operator action, say — would be
// handed back to River as a failed run, and a re-run job of a non-idempotent effect can only
// declare its outcome unknown.
func (c *Client) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return txn.Run(ctx, c.pool, c.logger, fn)
}

// inTx is withTx for fn with a result: a method that is its Tx pair in a transaction of its own
// returns inTx(ctx, c, …).
func inTx[T any](ctx context.Context, c *Client, fn func(tx pgx.Tx) (T, error)) (T, error) {
	var result T
	err := c.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		result, err = fn(tx)
		return err
	})
	return result, err
}
