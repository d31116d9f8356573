package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reckonhq/reckon/internal/dbsqlc"
	"github.com/reckonhq/reckon/internal/txn"
)

// ErrLockTimeout is wrapped by EnsurePartitions when a history's partitions could not be made
// because the step waited for a lock longer than ddlLockTimeout: another schema change, or a long
// transaction on the history. Nothing is lost meanwhile (a row no partition covers goes to the
// history's default partition and moves to its own when that is made); the next run tries again.
var ErrLockTimeout = errors.New("retention: lock timeout")

// ddlLockTimeout bounds how long a partition step waits for a lock: DDL waiting on a lock makes
// every later statement on the table queue behind it.
const ddlLockTimeout = "2s"

// EnsurePartitions makes the partitions of the three audit histories from the end of their last
// one up to now plus the premake of reckon_audit_settings (62 days by default), each history in a
// transaction of its own, and returns how many it made. A history whose step timed out waiting for
// a lock is left for later: the error wraps ErrLockTimeout and names it, and the others are made
// all the same. Every run calls it; a reactor calls it when it starts.
func EnsurePartitions(ctx context.Context, pool *pgxpool.Pool, now time.Time) (int, error) {
	created, deferred, err := ensurePartitions(ctx, pool, now)
	if err == nil && len(deferred) > 0 {
		err = fmt.Errorf("%w making the partitions of %s; tried again at the next run", ErrLockTimeout, strings.Join(deferred, ", "))
	}
	return created, err
}

// ensurePartitions is EnsurePartitions returning the histories it deferred for a lock timeout.
func ensurePartitions(ctx context.Context, pool *pgxpool.Pool, now time.Time) (created int, deferred []string, err error) {
	for _, parent := range histories {
		var n int32
		err := withDDLTx(ctx, pool, func(q *dbsqlc.Queries) (err error) {
			n, err = q.RetentionEnsurePartitions(ctx, dbsqlc.RetentionEnsurePartitionsParams{Parent: parent, At: now})
			return err
		})
		switch {
		case isLockTimeout(err):
			deferred = append(deferred, "ensure "+parent)
		case err != nil:
			return created, deferred, fmt.Errorf("retention: make the partitions of %s: %w", parent, err)
		}
		created += int(n)
	}
	return created, deferred, nil
}

// withDDLTx runs fn in a transaction whose statements wait at most ddlLockTimeout for a lock.
func withDDLTx(ctx context.Context, pool *pgxpool.Pool, fn func(q *dbsqlc.Queries) error) error {
	return txn.Once(ctx, pool, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.RetentionSetLockTimeout(ctx, ddlLockTimeout); err != nil {
			return err
		}
		return fn(q)
	})
}

func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable
}

// dropPartitions drops, oldest first, the partitions of the histories whose range ends at or
// before now minus the audit retention (the event retention for the event log), except those that
// still tell of an effect or saga that exists or hold an event an active webhook subscription has
// not delivered (held, reported). A lock timeout defers a partition to the next run.
func (r *Retention) dropPartitions(ctx context.Context, now time.Time, actor string, report *Report) error {
	partitions, err := dbsqlc.New(r.pool).RetentionPartitionList(ctx)
	if err != nil {
		return fmt.Errorf("retention: list the partitions: %w", err)
	}
	for _, p := range partitions {
		cutoff, keep, ok := r.cutoff(p.Parent, now)
		if !ok || p.RangeTo.After(cutoff) {
			continue
		}
		reason := fmt.Sprintf("%s retention %v: range ends at or before %s", retentionName(p.Parent), keep, cutoff.UTC().Format(time.RFC3339))
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("retention: drop partitions: %w", err)
		}
		var row dbsqlc.RetentionDropPartitionRow
		err := withDDLTx(ctx, r.pool, func(q *dbsqlc.Queries) (err error) {
			row, err = q.RetentionDropPartition(ctx, dbsqlc.RetentionDropPartitionParams{
				Name: p.Partition, Cutoff: cutoff, Actor: actor, Reason: reason,
			})
			return err
		})
		switch {
		case isLockTimeout(err):
			report.Deferred = append(report.Deferred, "drop "+p.Partition)
			r.logger.WarnContext(ctx, "retention: partition drop waited too long for a lock; tried again at the next run",
				slog.String("partition", p.Partition))
		case err != nil:
			return fmt.Errorf("retention: drop partition %s: %w", p.Partition, err)
		case row.Held:
			report.PartitionsHeld = append(report.PartitionsHeld, p.Partition)
		default:
			report.PartitionsDropped = append(report.PartitionsDropped, DroppedPartition{
				Parent: p.Parent, Partition: p.Partition, From: p.RangeFrom, To: p.RangeTo, Rows: row.DroppedRows,
			})
			r.metrics.partitionsDropped.WithLabelValues(p.Parent).Inc()
		}
	}
	return nil
}

// listPartitions is the dry run of dropPartitions: the partitions it would drop, with their rows,
// and those it would keep as held (as the database is now: a partition held only by effects that
// the same run prunes first is dropped by the run, not by the run after).
func (r *Retention) listPartitions(ctx context.Context, now time.Time, report *Report) error {
	q := dbsqlc.New(r.pool)
	partitions, err := q.RetentionPartitionList(ctx)
	if err != nil {
		return fmt.Errorf("retention: list the partitions: %w", err)
	}
	for _, p := range partitions {
		if cutoff, _, ok := r.cutoff(p.Parent, now); !ok || p.RangeTo.After(cutoff) {
			continue
		}
		held, err := q.RetentionPartitionHeld(ctx, dbsqlc.RetentionPartitionHeldParams{Parent: p.Parent, RangeFrom: p.RangeFrom, RangeTo: p.RangeTo})
		if err != nil {
			return fmt.Errorf("retention: partition %s: %w", p.Partition, err)
		}
		if held {
			report.PartitionsHeld = append(report.PartitionsHeld, p.Partition)
			continue
		}
		rows, err := q.RetentionPartitionRows(ctx, dbsqlc.RetentionPartitionRowsParams{Parent: p.Parent, RangeFrom: p.RangeFrom, RangeTo: p.RangeTo})
		if err != nil {
			return fmt.Errorf("retention: partition %s: %w", p.Partition, err)
		}
		report.PartitionsDropped = append(report.PartitionsDropped, DroppedPartition{
			Parent: p.Parent, Partition: p.Partition, From: p.RangeFrom, To: p.RangeTo, Rows: rows,
		})
	}
	return nil
}

// wouldCreate counts the partitions EnsurePartitions would make at now, as
// reckon_audit_ensure_partitions computes them.
func wouldCreate(ctx context.Context, q *dbsqlc.Queries, now time.Time) (int, error) {
	settings, err := q.RetentionAuditSettingsGet(ctx)
	if err != nil {
		return 0, fmt.Errorf("retention: read the audit settings: %w", err)
	}
	partitions, err := q.RetentionPartitionList(ctx)
	if err != nil {
		return 0, fmt.Errorf("retention: list the partitions: %w", err)
	}
	last := map[string]time.Time{}
	for _, p := range partitions {
		if p.RangeTo.After(last[p.Parent]) {
			last[p.Parent] = p.RangeTo
		}
	}
	horizon := now.Add(time.Duration(settings.PremakeSeconds) * time.Second)
	n := 0
	for _, end := range last {
		for ; end.Before(horizon); n++ {
			end = nextBound(end, settings.Period)
		}
	}
	return n, nil
}

// nextBound is the end of the partition that starts at from: the next UTC midnight (period "day")
// or the first of the next month, as date_trunc(period, from + 1 period, 'UTC').
func nextBound(from time.Time, period string) time.Time {
	from = from.UTC()
	if period == "day" {
		return time.Date(from.Year(), from.Month(), from.Day()+1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(from.Year(), from.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// retentionName names the retention that keeps parent, for the reason of a drop.
func retentionName(parent string) string {
	if parent == eventsTable {
		return "event"
	}
	return "audit"
}
