package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/txn"
)

// cutoffs are a run's bounds: a tenant's rows go when older than now minus its retention (its
// policy's, else global). scanBefore is the newest cutoff of all tenants, which bounds every
// index scan.
type cutoffs struct {
	now           time.Time
	scanBefore    time.Time
	globalSeconds int64
	dedupSeconds  int64
	batch         int32
}

// beginning is the first cursor of a scan: before every row.
var beginning = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

func (r *Retention) cutoffs(ctx context.Context, now time.Time) (cutoffs, error) {
	shortest, err := dbsqlc.New(r.pool).RetentionPolicyShortest(ctx)
	if err != nil {
		return cutoffs{}, fmt.Errorf("retention: read the policies: %w", err)
	}
	global := int64(r.cfg.EffectRetention / time.Second)
	scan := global
	if shortest > 0 && shortest < scan {
		scan = shortest
	}
	return cutoffs{
		now: now, scanBefore: now.Add(-time.Duration(scan) * time.Second), globalSeconds: global,
		dedupSeconds: int64(r.cfg.DedupWindow / time.Second), batch: int32(r.cfg.BatchSize),
	}, nil
}

// prune deletes, in order, what has outlived its retention (the package documentation's list).
func (r *Retention) prune(ctx context.Context, c cutoffs, report *Report) error {
	for _, phase := range []func(context.Context, cutoffs, *Report) error{
		r.pruneSagas, r.pruneTurns, r.pruneRuns, r.pruneEffects, r.pruneSmall,
	} {
		if err := phase(ctx, c, report); err != nil {
			return err
		}
	}
	return nil
}

// batchResult is what one batch did: how many candidates it found (fewer than the batch size:
// the phase is done), what it removed per table, and the scan's cursor after it.
type batchResult struct {
	candidates int
	removed    map[string]int64
	after      time.Time
}

// batches runs batch until it finds fewer candidates than the batch size, removes nothing without
// moving its cursor, ctx ends, or it fails. Each batch that committed is added to report and to
// the metrics at once, so that an interrupted run still counts it. A batch that failed on a
// foreign key — a row that references a doomed one appeared meanwhile (a compensation, a saga
// step) — is tried again, twice, with a fresh look at the candidates.
func (r *Retention) batches(ctx context.Context, phase string, c cutoffs, report *Report, batch func(ctx context.Context, after time.Time) (batchResult, error)) error {
	progress := newProgress(r.logger, phase)
	after := beginning
	conflicts := 0
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("retention: %s: %w", phase, err)
		}
		result, err := batch(ctx, after)
		if isForeignKeyViolation(err) && conflicts < 2 {
			conflicts++
			r.logger.WarnContext(ctx, "retention: a batch met a row added meanwhile; trying it again",
				slog.String("phase", phase), slog.String("error", err.Error()))
			continue
		}
		if err != nil {
			return fmt.Errorf("retention: %s: %w", phase, err)
		}
		var removed int64
		for table, n := range result.removed {
			report.Removed[table] += n
			r.metrics.rowsPruned.WithLabelValues(table).Add(float64(n))
			removed += n
		}
		progress.add(ctx, removed)
		if r.afterBatch != nil {
			r.afterBatch(phase)
		}
		if result.candidates < int(c.batch) || (removed == 0 && !result.after.After(after)) {
			return nil
		}
		after = result.after
	}
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation
}

func (r *Retention) pruneSagas(ctx context.Context, c cutoffs, report *Report) error {
	return r.txBatches(ctx, "sagas", c, report, func(ctx context.Context, q *dbsqlc.Queries, after time.Time) (batchResult, error) {
		row, err := q.RetentionSagaPrune(ctx, dbsqlc.RetentionSagaPruneParams{
			ScanBefore: c.scanBefore, After: after, Now: c.now, GlobalSeconds: c.globalSeconds, MaxRows: c.batch,
		})
		return batchResult{
			candidates: int(row.Candidates), after: row.LastAt,
			removed: map[string]int64{TableSagas: row.Sagas, TableSagaSteps: row.Steps},
		}, err
	})
}

// pruneTurns deletes whole turn groups. A batch reads candidate turns, locks every turn of their
// groups (skipping those another transaction holds) and deletes the groups that still qualify and
// whose every turn it locked, with their messages and decisions, in one transaction.
func (r *Retention) pruneTurns(ctx context.Context, c cutoffs, report *Report) error {
	return r.txBatches(ctx, "turns", c, report, func(ctx context.Context, q *dbsqlc.Queries, after time.Time) (batchResult, error) {
		candidates, err := q.RetentionTurnGroupCandidates(ctx, dbsqlc.RetentionTurnGroupCandidatesParams{
			ScanBefore: c.scanBefore, After: after, Now: c.now, GlobalSeconds: c.globalSeconds, MaxRows: c.batch,
		})
		if err != nil || len(candidates) == 0 {
			return batchResult{after: after}, err
		}
		result := batchResult{candidates: len(candidates), after: candidates[len(candidates)-1].CreatedAt}
		seen := make(map[uuid.UUID]bool, len(candidates))
		groups := make([]uuid.UUID, 0, len(candidates))
		for _, candidate := range candidates {
			if !seen[candidate.TurnGroup] {
				seen[candidate.TurnGroup] = true
				groups = append(groups, candidate.TurnGroup)
			}
		}
		locked, err := q.RetentionTurnLock(ctx, groups)
		if err != nil {
			return result, err
		}
		deleted, err := q.RetentionTurnGroupDelete(ctx, dbsqlc.RetentionTurnGroupDeleteParams{
			Groups: groups, Locked: locked, Now: c.now, GlobalSeconds: c.globalSeconds,
		})
		if err != nil {
			return result, err
		}
		result.removed = map[string]int64{TableTurns: deleted.Turns, TableMessages: deleted.Messages, TableTurnDecisions: deleted.Decisions}
		return result, nil
	})
}

func (r *Retention) pruneRuns(ctx context.Context, c cutoffs, report *Report) error {
	return r.txBatches(ctx, "runs", c, report, func(ctx context.Context, q *dbsqlc.Queries, after time.Time) (batchResult, error) {
		row, err := q.RetentionRunPrune(ctx, dbsqlc.RetentionRunPruneParams{
			ScanBefore: c.scanBefore, After: after, Now: c.now, GlobalSeconds: c.globalSeconds, MaxRows: c.batch,
			DedupSeconds: c.dedupSeconds,
		})
		return batchResult{candidates: int(row.Candidates), after: row.LastAt, removed: map[string]int64{TableRuns: row.Runs, TableEffects: row.Effects}}, err
	})
}

func (r *Retention) pruneEffects(ctx context.Context, c cutoffs, report *Report) error {
	return r.txBatches(ctx, "effects", c, report, func(ctx context.Context, q *dbsqlc.Queries, after time.Time) (batchResult, error) {
		row, err := q.RetentionEffectPrune(ctx, dbsqlc.RetentionEffectPruneParams{
			ScanBefore: c.scanBefore, After: after, Now: c.now, GlobalSeconds: c.globalSeconds, MaxRows: c.batch,
			DedupSeconds: c.dedupSeconds,
		})
		return batchResult{candidates: int(row.Candidates), after: row.LastAt, removed: map[string]int64{TableEffects: row.Effects}}, err
	})
}

// txBatches is batches for a batch that runs in a transaction of its own, which a retried batch
// begins again.
func (r *Retention) txBatches(ctx context.Context, phase string, c cutoffs, report *Report, batch func(ctx context.Context, q *dbsqlc.Queries, after time.Time) (batchResult, error)) error {
	return r.batches(ctx, phase, c, report, func(ctx context.Context, after time.Time) (batchResult, error) {
		var result batchResult
		err := txn.Run(ctx, r.pool, r.logger, func(tx pgx.Tx) (err error) {
			result, err = batch(ctx, dbsqlc.New(tx), after)
			return err
		})
		return result, err
	})
}

// pruneSmall deletes what expires on its own: tombstones past their dedup window, stored
// Idempotency-Key responses past IdempotencyTTL, signatures of signed callbacks past their window,
// console sessions past their expiry (a sign-in prunes a few too, but without sign-ins they stay).
func (r *Retention) pruneSmall(ctx context.Context, c cutoffs, report *Report) error {
	q := dbsqlc.New(r.pool)
	err := r.execBatches(ctx, TableTombstones, c, report, func(ctx context.Context) (int64, error) {
		return q.RetentionTombstonePrune(ctx, dbsqlc.RetentionTombstonePruneParams{Now: c.now, MaxRows: c.batch})
	})
	if err != nil {
		return err
	}
	// The server's own pruning (cmd/server), which loops over its batches itself.
	n, err := PruneIdempotencyKeys(ctx, r.pool, c.now.Add(-r.cfg.IdempotencyTTL), int(c.batch))
	report.Removed[TableIdempotencyKeys] += n
	r.metrics.rowsPruned.WithLabelValues(TableIdempotencyKeys).Add(float64(n))
	if err != nil {
		return err
	}
	err = r.execBatches(ctx, TableCallbackSignatures, c, report, func(ctx context.Context) (int64, error) {
		return q.CallbackSignaturePrune(ctx, dbsqlc.CallbackSignaturePruneParams{Now: c.now, MaxRows: c.batch})
	})
	if err != nil {
		return err
	}
	return r.execBatches(ctx, TableOperatorSessions, c, report, func(ctx context.Context) (int64, error) {
		return q.OperatorSessionPruneExpired(ctx, dbsqlc.OperatorSessionPruneExpiredParams{Now: &c.now, MaxRows: c.batch})
	})
}

// execBatches is batches for a statement that deletes up to a batch of rows of table and says
// how many.
func (r *Retention) execBatches(ctx context.Context, table string, c cutoffs, report *Report, fn func(ctx context.Context) (int64, error)) error {
	return r.batches(ctx, table, c, report, func(ctx context.Context, after time.Time) (batchResult, error) {
		n, err := fn(ctx)
		return batchResult{candidates: int(n), after: after, removed: map[string]int64{table: n}}, err
	})
}

// pruneRecords forgets the records of retention runs started before the audit retention.
func (r *Retention) pruneRecords(ctx context.Context, now time.Time, report *Report) error {
	if r.cfg.AuditRetention == 0 {
		return nil
	}
	c := cutoffs{batch: int32(r.cfg.BatchSize)}
	q := dbsqlc.New(r.pool)
	return r.execBatches(ctx, TableRetentionRuns, c, report, func(ctx context.Context) (int64, error) {
		return q.RetentionRunRecordPrune(ctx, dbsqlc.RetentionRunRecordPruneParams{Cutoff: now.Add(-r.cfg.AuditRetention), MaxRows: c.batch})
	})
}

// count is the dry run of prune: what it would remove, counted.
func (r *Retention) count(ctx context.Context, c cutoffs, report *Report) error {
	q := dbsqlc.New(r.pool)
	sagas, err := q.RetentionSagaCount(ctx, dbsqlc.RetentionSagaCountParams{ScanBefore: c.scanBefore, Now: c.now, GlobalSeconds: c.globalSeconds})
	if err != nil {
		return fmt.Errorf("retention: count sagas: %w", err)
	}
	turns, err := q.RetentionTurnGroupCount(ctx, dbsqlc.RetentionTurnGroupCountParams{ScanBefore: c.scanBefore, Now: c.now, GlobalSeconds: c.globalSeconds})
	if err != nil {
		return fmt.Errorf("retention: count turns: %w", err)
	}
	runs, err := q.RetentionRunCount(ctx, dbsqlc.RetentionRunCountParams{ScanBefore: c.scanBefore, Now: c.now, GlobalSeconds: c.globalSeconds})
	if err != nil {
		return fmt.Errorf("retention: count runs: %w", err)
	}
	effects, err := q.RetentionEffectCount(ctx, dbsqlc.RetentionEffectCountParams{ScanBefore: c.scanBefore, Now: c.now, GlobalSeconds: c.globalSeconds})
	if err != nil {
		return fmt.Errorf("retention: count effects: %w", err)
	}
	tombstones, err := q.RetentionTombstoneCount(ctx, c.now)
	if err != nil {
		return fmt.Errorf("retention: count tombstones: %w", err)
	}
	keys, err := q.RetentionIdempotencyKeyCount(ctx, c.now.Add(-r.cfg.IdempotencyTTL))
	if err != nil {
		return fmt.Errorf("retention: count idempotency keys: %w", err)
	}
	signatures, err := q.RetentionCallbackSignatureCount(ctx, c.now)
	if err != nil {
		return fmt.Errorf("retention: count callback signatures: %w", err)
	}
	sessions, err := q.RetentionOperatorSessionCount(ctx, c.now)
	if err != nil {
		return fmt.Errorf("retention: count console sessions: %w", err)
	}
	var records int64
	if r.cfg.AuditRetention != 0 {
		if records, err = q.RetentionRunRecordCount(ctx, c.now.Add(-r.cfg.AuditRetention)); err != nil {
			return fmt.Errorf("retention: count retention runs: %w", err)
		}
	}
	for table, n := range map[string]int64{
		TableSagas: sagas.Sagas, TableSagaSteps: sagas.Steps, TableTurns: turns.Turns, TableMessages: turns.Messages,
		TableTurnDecisions: turns.Decisions, TableRuns: runs.Runs, TableEffects: runs.Effects + effects,
		TableTombstones: tombstones, TableIdempotencyKeys: keys, TableCallbackSignatures: signatures, TableOperatorSessions: sessions, TableRetentionRuns: records,
	} {
		report.Removed[table] = n
	}
	return nil
}

// progressEvery is how often a long phase logs its progress.
const progressEvery = 10 * time.Second

// progress logs a phase's rows so far and its rate, at most every progressEvery.
type progress struct {
	logger *slog.Logger
	phase  string
	start  time.Time
	last   time.Time
	rows   int64
}

func newProgress(logger *slog.Logger, phase string) *progress {
	now := time.Now()
	return &progress{logger: logger, phase: phase, start: now, last: now}
}

func (p *progress) add(ctx context.Context, rows int64) {
	p.rows += rows
	now := time.Now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	elapsed := now.Sub(p.start)
	p.logger.InfoContext(ctx, "retention progress", slog.String("phase", p.phase), slog.Int64("rows", p.rows),
		slog.Float64("rows_per_second", float64(p.rows)/elapsed.Seconds()), slog.Duration("elapsed", elapsed))
}
