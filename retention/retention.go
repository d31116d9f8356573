package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/conf"
	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/jsonx"
)

// Tables whose rows retention deletes: the keys of Report.Removed and the table label of
// reckon_retention_rows_pruned_total.
const (
	TableSagas              = "reckon_sagas"
	TableSagaSteps          = "reckon_saga_steps"
	TableTurns              = "reckon_turns"
	TableMessages           = "reckon_messages"
	TableTurnDecisions      = "reckon_turn_decisions"
	TableRuns               = "reckon_runs"
	TableEffects            = "reckon_effects"
	TableTombstones         = "reckon_effect_tombstones"
	TableIdempotencyKeys    = "reckon_idempotency_keys"
	TableCallbackSignatures = "reckon_callback_signatures"
	TableOperatorSessions   = "reckon_operator_sessions"
	TableRetentionRuns      = "reckon_retention_runs"
)

// prunedTables are the tables above in the order a run prunes them.
var prunedTables = []string{
	TableSagas, TableSagaSteps, TableTurns, TableMessages, TableTurnDecisions, TableRuns, TableEffects,
	TableTombstones, TableIdempotencyKeys, TableCallbackSignatures, TableOperatorSessions, TableRetentionRuns,
}

// histories are the partitioned audit histories (migration 0016) and the event log (0027, kept for
// Config.EventRetention instead of AuditRetention).
var histories = []string{"reckon_effect_transitions", "reckon_saga_transitions", "reckon_definition_changes", eventsTable}

// eventsTable is the event log (package events).
const eventsTable = "reckon_events"

// cutoff is the end of the range at or before which a partition of parent is dropped at now, and
// the retention that sets it; ok is false when that retention is 0 (kept forever).
func (r *Retention) cutoff(parent string, now time.Time) (cutoff time.Time, keep time.Duration, ok bool) {
	keep = r.cfg.AuditRetention
	if parent == eventsTable {
		keep = r.cfg.EventRetention
	}
	return now.Add(-keep), keep, keep != 0
}

// ErrBusy is returned by Run when another run, in this process or another, holds the retention
// lock. Nothing was done; the next run will do it.
var ErrBusy = errors.New("retention: another retention run is in progress")

// Retention prunes a database (see the package documentation). It is safe for concurrent use;
// runs are serialized across processes by an advisory lock.
type Retention struct {
	pool    *pgxpool.Pool
	cfg     Config
	logger  *slog.Logger
	metrics *metrics

	afterBatch func(phase string) // tests: called after each committed batch
}

// New returns a Retention of the database of pool. A configuration error names the field.
func New(pool *pgxpool.Pool, cfg *Config) (*Retention, error) {
	if pool == nil {
		return nil, errors.New("retention: New needs a pool")
	}
	c, err := conf.Resolve(cfg, (*Config).setDefaults)
	if err != nil {
		return nil, err
	}
	metrics, err := newMetrics(c.Registerer)
	if err != nil {
		return nil, err
	}
	return &Retention{pool: pool, cfg: c, logger: c.Logger, metrics: metrics}, nil
}

// RunOpts are the options of one run.
type RunOpts struct {
	// Actor names who runs it, in reckon_retention_runs and reckon_audit_drops:
	// "retention:{reactor id}" for the periodic job, "cli:{user}" for `server retention run`.
	// Required.
	Actor string
	// DryRun counts what the run would remove and lists the partitions it would drop and keep,
	// and changes nothing (no delete, no tombstone, no partition made or dropped).
	DryRun bool
}

// Report is what a run did (or, for a dry run, would do).
type Report struct {
	DryRun bool `json:"dry_run"`
	// Removed counts the rows deleted per table (Table… constants), every table present.
	Removed map[string]int64 `json:"removed"`
	// PartitionsCreated counts the partitions of the histories made ahead (a dry run: that would
	// be made).
	PartitionsCreated int `json:"partitions_created"`
	// PartitionsDropped are the partitions dropped past the audit retention, oldest first.
	PartitionsDropped []DroppedPartition `json:"partitions_dropped"`
	// PartitionsHeld are the partitions past the audit retention that still tell of an effect or
	// saga that exists: kept until it is pruned.
	PartitionsHeld []string `json:"partitions_held"`
	// Deferred names the partition steps that waited for a lock longer than 2s (another schema
	// change, or a long transaction on the history): not a failure, they are tried again at the
	// next run.
	Deferred []string `json:"deferred,omitempty"`
	// Started is the run's clock (Config.Now) when it started: the cutoffs are computed from it.
	Started time.Time `json:"started"`
	// Duration is how long the run took.
	Duration time.Duration `json:"duration_ns"`
}

// RemovedTotal is the sum of Removed.
func (r *Report) RemovedTotal() int64 {
	var n int64
	for _, v := range r.Removed {
		n += v
	}
	return n
}

// DroppedPartition is a partition of a history that a run dropped (a dry run: would drop).
type DroppedPartition struct {
	// Parent is the history: reckon_effect_transitions, reckon_saga_transitions or
	// reckon_definition_changes.
	Parent    string `json:"parent"`
	Partition string `json:"partition"`
	// From is the start of its range, nil for the first partition (from the beginning); To its
	// end (excluded).
	From *time.Time `json:"from"`
	To   time.Time  `json:"to"`
	// Rows is how many rows it held.
	Rows int64 `json:"rows"`
}

// Run runs retention once: see the package documentation for what it removes and in which order.
// It returns ErrBusy at once if another run holds the retention lock. Every batch is a transaction
// of its own, so a run that fails or whose ctx ends keeps what its committed batches removed and
// leaves nothing half-deleted; the next run goes on from there. The returned Report says what was
// done, also alongside an error. The run is recorded in reckon_retention_runs (a process killed
// mid-run leaves its record unfinished: `server retention status` shows it as interrupted).
func (r *Retention) Run(ctx context.Context, opts *RunOpts) (*Report, error) {
	if opts == nil || opts.Actor == "" {
		return nil, errors.New("retention: RunOpts.Actor is required")
	}
	if err := jsonx.CheckTexts("RunOpts.Actor", opts.Actor); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("retention: connection for the retention lock: %w", err)
	}
	defer conn.Release()
	lockQueries := dbsqlc.New(conn)
	lock := dbsqlc.RetentionLockTryParams{Namespace: db.AdvisoryLockNamespace, Key: db.LockKeyRetention}
	locked, err := lockQueries.RetentionLockTry(ctx, lock)
	if err != nil {
		return nil, fmt.Errorf("retention: take the retention lock: %w", err)
	}
	if !locked {
		if !opts.DryRun {
			r.metrics.runs.WithLabelValues(resultBusy).Inc()
		}
		return nil, ErrBusy
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := lockQueries.RetentionUnlock(unlockCtx, dbsqlc.RetentionUnlockParams(lock)); err != nil {
			// A connection that cannot unlock is closed, which frees the lock.
			_ = conn.Conn().Close(unlockCtx)
		}
	}()

	report := newReport(opts.DryRun, r.cfg.Now())
	wallStart := time.Now()
	queries := dbsqlc.New(r.pool)
	recordID, err := queries.RetentionRunRecordStart(ctx, dbsqlc.RetentionRunRecordStartParams{
		Actor: opts.Actor, DryRun: opts.DryRun, StartedAt: report.Started,
	})
	if err != nil {
		return nil, fmt.Errorf("retention: record the run: %w", err)
	}
	runErr := r.run(ctx, opts, report)
	report.Duration = time.Since(wallStart)
	if err := r.finishRecord(ctx, recordID, report, runErr); err != nil {
		runErr = errors.Join(runErr, err)
	}
	r.observe(ctx, opts, report, runErr)
	if runErr != nil {
		return report, runErr
	}
	return report, nil
}

func newReport(dryRun bool, started time.Time) *Report {
	report := &Report{DryRun: dryRun, Removed: make(map[string]int64, len(prunedTables)), Started: started,
		PartitionsDropped: []DroppedPartition{}, PartitionsHeld: []string{}}
	for _, table := range prunedTables {
		report.Removed[table] = 0
	}
	return report
}

// run does the work of Run under the lock.
func (r *Retention) run(ctx context.Context, opts *RunOpts, report *Report) error {
	now := report.Started
	c, err := r.cutoffs(ctx, now)
	if err != nil {
		return err
	}
	if opts.DryRun {
		if report.PartitionsCreated, err = wouldCreate(ctx, dbsqlc.New(r.pool), now); err != nil {
			return err
		}
		if err := r.count(ctx, c, report); err != nil {
			return err
		}
		return r.listPartitions(ctx, now, report)
	}
	created, deferred, err := ensurePartitions(ctx, r.pool, now)
	report.PartitionsCreated = created
	report.Deferred = append(report.Deferred, deferred...)
	r.metrics.partitionsCreated.Add(float64(created))
	if err != nil {
		return err
	}
	if err := r.prune(ctx, c, report); err != nil {
		return err
	}
	if err := r.dropPartitions(ctx, now, opts.Actor, report); err != nil {
		return err
	}
	return r.pruneRecords(ctx, now, report)
}

// finishRecord completes the run's reckon_retention_runs row, even when ctx has ended.
func (r *Retention) finishRecord(ctx context.Context, id int64, report *Report, runErr error) error {
	removed, err := json.Marshal(report)
	if err != nil {
		return fmt.Errorf("retention: encode the report: %w", err)
	}
	var errText *string
	if runErr != nil {
		text := jsonx.SafeText(runErr.Error())
		errText = &text
	}
	finishCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	finished := report.Started.Add(report.Duration)
	err = dbsqlc.New(r.pool).RetentionRunRecordFinish(finishCtx, dbsqlc.RetentionRunRecordFinishParams{
		ID: id, FinishedAt: &finished, Removed: removed, Error: errText,
	})
	if err != nil {
		return fmt.Errorf("retention: record the end of the run: %w", err)
	}
	return nil
}

// observe logs the run's line and, for a real run, updates the metrics.
func (r *Retention) observe(ctx context.Context, opts *RunOpts, report *Report, err error) {
	attrs := []any{
		slog.String("actor", opts.Actor), slog.Bool("dry_run", opts.DryRun),
		slog.Int64("rows", report.RemovedTotal()), slog.Any("removed", nonZero(report.Removed)),
		slog.Int("partitions_created", report.PartitionsCreated), slog.Int("partitions_dropped", len(report.PartitionsDropped)),
		slog.Int("partitions_held", len(report.PartitionsHeld)), slog.Duration("duration", report.Duration),
	}
	if len(report.Deferred) > 0 {
		attrs = append(attrs, slog.Any("deferred", report.Deferred))
	}
	if err != nil {
		r.logger.ErrorContext(ctx, "retention run failed", append(attrs, slog.String("error", err.Error()))...)
	} else {
		r.logger.InfoContext(ctx, "retention run", attrs...)
	}
	if opts.DryRun {
		return
	}
	r.metrics.duration.Observe(report.Duration.Seconds())
	r.metrics.held.Set(float64(len(report.PartitionsHeld)))
	if err != nil {
		r.metrics.runs.WithLabelValues(resultError).Inc()
		return
	}
	r.metrics.runs.WithLabelValues(resultOK).Inc()
	r.metrics.lastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
}

// nonZero is removed without its zeros, for the log line.
func nonZero(removed map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for table, n := range removed {
		if n != 0 {
			out[table] = n
		}
	}
	return out
}
