package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/metric"
	"github.com/reckonhq/reckon/internal/postgres"
	"github.com/reckonhq/reckon/internal/service"
	"github.com/reckonhq/reckon/internal/txn"
)

// Config configures a Scheduler. Nil means the defaults.
type Config struct {
	// Logger receives the scheduler's log. Default: discarded.
	Logger *slog.Logger
	// Registerer registers the metrics (reckon_schedule_*). Default: none.
	Registerer prometheus.Registerer
	// Interval is how often the scheduler looks for due ticks: a tick is enqueued within about
	// this much of its time. Default 1s; from 10ms to 1m.
	Interval time.Duration
}

// Validate reports a setting out of range.
func (c *Config) Validate() error {
	if c.Interval != 0 && (c.Interval < 10*time.Millisecond || c.Interval > time.Minute) {
		return fmt.Errorf("schedule: Config.Interval %v out of range (10ms to 1m)", c.Interval)
	}
	return nil
}

// Scheduler enqueues the ticks of the stored schedules (package doc). It is a plugin of an
// effects.Client: install it in every process whose effects client runs (reactors); they share the
// work through the schedules' row locks.
type Scheduler struct {
	pool    *pgxpool.Pool
	config  Config
	metrics *metrics
	client  *effects.Client
}

// New returns the scheduler of the schedules stored in pool's database; install it in an
// effects client (effects.Config.Plugins).
func New(pool *pgxpool.Pool, config *Config) (*Scheduler, error) {
	if config == nil {
		config = &Config{}
	}
	cfg := *config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Scheduler{pool: pool, config: cfg, metrics: m}, nil
}

// Install adds the scheduler to the effects client being built as a service
// (effects.PluginHost.AddService): it runs from the client's Start to its Stop. A round cut short
// by Stop rolls back: what it had not committed is enqueued by the next round of any scheduler.
func (s *Scheduler) Install(host *effects.PluginHost) error {
	s.client = host.Client()
	return host.AddService(service.NewLoop(s.run))
}

// run runs rounds until ctx ends: one at once, then one every Interval, or at once again after a
// round that left due ticks behind (a catch-up beyond CatchUpBatch, more due schedules than one
// round takes).
func (s *Scheduler) run(ctx context.Context) {
	ticker := time.NewTicker(s.config.Interval)
	defer ticker.Stop()
	for {
		more, err := s.Round(ctx)
		if err != nil && ctx.Err() == nil {
			s.config.Logger.ErrorContext(ctx, "schedule: round failed; tried again next round", slog.String("error", err.Error()))
		}
		if more && err == nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// maxDuePerRound bounds the schedules one round looks at.
const maxDuePerRound = 100

// Round enqueues the due ticks of the due schedules once, each schedule in a transaction of its
// own (tick): the scheduler's service runs it every Config.Interval; a test may call it to run a
// round now. It reports whether due ticks may remain.
func (s *Scheduler) Round(ctx context.Context) (more bool, err error) {
	if s.client == nil {
		return false, errors.New("schedule: Round before the scheduler was installed in an effects client")
	}
	due, err := dbsqlc.New(s.pool).ScheduleDue(ctx, maxDuePerRound)
	if err != nil {
		return false, fmt.Errorf("schedule: due schedules: %w", err)
	}
	more = len(due) == maxDuePerRound
	var errs []error
	for _, d := range due {
		left, err := s.tick(ctx, d.TenantID, d.Name)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			errs = append(errs, fmt.Errorf("schedule %s/%s: %w", d.TenantID, d.Name, err))
		}
		more = more || left
	}
	return more, errors.Join(errs...)
}

// tick locks schedule tenant/name if it is still due and no other scheduler holds it, and in the
// same transaction enqueues the effects of its due ticks (as its policy says) and moves its next
// tick past them. It reports whether due ticks remain.
func (s *Scheduler) tick(ctx context.Context, tenant, name string) (more bool, err error) {
	err = txn.Run(ctx, s.pool, s.config.Logger, func(tx pgx.Tx) error {
		more = false
		q := dbsqlc.New(tx)
		row, err := q.ScheduleLockDue(ctx, dbsqlc.ScheduleLockDueParams{TenantID: tenant, Name: name})
		if postgres.NoRows(err) {
			return nil // enqueued meanwhile, disabled, deleted, or another scheduler holds it
		} else if err != nil {
			return err
		}
		sched := fromRow(dbsqlc.ReckonSchedule{
			TenantID: row.TenantID, Name: row.Name, Connector: row.Connector, Args: row.Args, Cron: row.Cron,
			IntervalSeconds: row.IntervalSeconds, Missed: row.Missed, Enabled: row.Enabled, NextTick: row.NextTick,
			LastError: row.LastError,
		})
		t, err := sched.ticker()
		if err != nil { // stored by an older or foreign writer: the round cannot compute its ticks
			return q.ScheduleFailed(ctx, dbsqlc.ScheduleFailedParams{TenantID: tenant, Name: name, LastError: ptr(err.Error())})
		}
		r := dueRound(t, sched.missed(), sched.NextTick, row.DbNow)
		more = r.more
		return s.enqueueRound(ctx, tx, sched, t, r, row.DbNow)
	})
	return more, err
}

// enqueueRound enqueues r's ticks of sched in tx, each in a savepoint, and moves its next tick on
// past those enqueued. A tick the effects client refuses (an unknown connector, args refused)
// stops the round there: the schedule records why, and that tick stays due.
func (s *Scheduler) enqueueRound(ctx context.Context, tx pgx.Tx, sched *Schedule, t ticker, r round, now time.Time) error {
	var (
		last     *time.Time
		effectID *uuid.UUID
		problem  string
	)
	for _, tick := range r.ticks {
		e, err := s.enqueueTick(ctx, tx, sched, tick)
		if errors.Is(err, errRefused) {
			problem = err.Error()
			break
		} else if err != nil {
			return err
		}
		last = &tick
		if e != nil {
			effectID = &e.ID
			s.metrics.enqueued.Inc()
			s.metrics.lag.Observe(now.Sub(tick).Seconds())
		}
	}
	q := dbsqlc.New(tx)
	if last == nil {
		if problem != sched.LastError {
			s.config.Logger.WarnContext(ctx, "schedule: a due tick could not be enqueued; tried again next round",
				slog.String("tenant_id", sched.Tenant), slog.String("schedule", sched.Name), slog.String("error", problem))
		}
		s.metrics.refused.Inc()
		return q.ScheduleFailed(ctx, dbsqlc.ScheduleFailedParams{TenantID: sched.Tenant, Name: sched.Name, LastError: &problem})
	}
	if r.dropped {
		s.metrics.dropped.WithLabelValues(string(sched.missed())).Inc()
	}
	params := dbsqlc.ScheduleAdvanceParams{
		TenantID: sched.Tenant, Name: sched.Name, NextTick: t.Next(*last), LastTick: last, LastEffectID: effectID,
	}
	if problem != "" {
		params.LastError = &problem
	}
	return q.ScheduleAdvance(ctx, params)
}

// errRefused wraps the errors of an enqueue that the effects client refused without touching the
// database (the tick stays due).
var errRefused = errors.New("refused")

// enqueueTick enqueues the effect of one tick in a savepoint of tx. It returns the effect, or nil
// for a tick that is done without one (its key belongs to a pruned effect, or to another effect:
// that one is its effect). An enqueue the effects client refuses is errRefused.
func (s *Scheduler) enqueueTick(ctx context.Context, tx pgx.Tx, sched *Schedule, tick time.Time) (*effects.Effect, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	key := IdempotencyKey(sched.Name, tick)
	e, err := s.client.EnqueueTx(ctx, sp, effects.Spec{
		TenantID: sched.Tenant, Connector: sched.Connector, Args: sched.Args, IdempotencyKey: key,
	}, &effects.EnqueueOpts{Actor: "schedule:" + sched.Name, Reason: "tick " + tick.UTC().Format(time.RFC3339)})
	switch {
	case err == nil:
		return e, sp.Commit(ctx)
	case errors.Is(err, effects.ErrPruned), errors.Is(err, effects.ErrIdempotencyConflict):
		// The tick's key is taken (a tick enqueued long ago and pruned, or the same tick of a schedule
		// of that name replaced since): the tick is done.
		s.config.Logger.WarnContext(ctx, "schedule: a tick's idempotency key is taken; the tick is skipped",
			slog.String("tenant_id", sched.Tenant), slog.String("schedule", sched.Name), slog.String("idempotency_key", key), slog.String("error", err.Error()))
		return nil, sp.Rollback(ctx)
	case errors.Is(err, effects.ErrUnknownConnector), errors.Is(err, effects.ErrInvalidArgs), errors.Is(err, effects.ErrNoSettleHook):
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return nil, rbErr
		}
		return nil, fmt.Errorf("%w: tick %s: %w", errRefused, tick.UTC().Format(time.RFC3339), err)
	default:
		return nil, err
	}
}

type metrics struct {
	enqueued prometheus.Counter
	dropped  *prometheus.CounterVec
	refused  prometheus.Counter
	lag      prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		enqueued: metric.Counter("reckon_schedule_ticks_total", "Ticks of schedules enqueued as effects."),
		dropped: metric.CounterVec("reckon_schedule_missed_total",
			"Rounds of a schedule that dropped missed ticks for good, by policy (skip: all but the latest; catch_up: beyond its bounds).", "policy"),
		refused: metric.Counter("reckon_schedule_refused_total",
			"Rounds of a schedule whose due tick the effects client refused (unknown connector, args refused): the tick stays due."),
		lag: metric.Histogram("reckon_schedule_lag_seconds", "How late a tick's effect was enqueued after its time.",
			[]float64{0.1, 0.5, 1, 2, 5, 15, 60, 300, 3600}),
	}
	return m, metric.Register(reg, m.enqueued, m.dropped, m.refused, m.lag)
}

func ptr[T any](v T) *T { return &v }
