package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/reckonhq/reckon/db"
	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Status is what `server retention status` shows: the settings, the size of each table, the
// partitions of the histories, what the next run would remove, and the last runs.
type Status struct {
	// Now is the clock (Config.Now) the status was computed at.
	Now time.Time `json:"now"`
	// The settings: the Retention's (from the flags) and the database's.
	EffectRetention time.Duration `json:"effect_retention_ns"`
	AuditRetention  time.Duration `json:"audit_retention_ns"`
	EventRetention  time.Duration `json:"event_retention_ns"`
	DedupWindow     time.Duration `json:"dedup_window_ns"`
	IdempotencyTTL  time.Duration `json:"idempotency_ttl_ns"`
	BatchSize       int           `json:"batch_size"`
	Audit           AuditSettings `json:"audit"`
	Policies        []Policy      `json:"policies"`
	// Tables are Reckon's tables (and River's jobs), each with its size.
	Tables []TableStatus `json:"tables"`
	// Partitions are the partitions of the histories, per history oldest first, its default
	// partition last.
	Partitions []PartitionStatus `json:"partitions"`
	// Next is the dry run of the next run: what it would remove and drop as the database is now.
	Next *Report `json:"next"`
	// Runs are the last runs, newest first.
	Runs []RunRecord `json:"runs"`
}

// TableStatus is one table's size.
type TableStatus struct {
	Name string `json:"name"`
	// Bytes is its size on disk: table, indexes and TOAST, its partitions summed.
	Bytes int64 `json:"bytes"`
	// RowsEstimate is Postgres's estimate of its rows (pg_class.reltuples; 0 until first analyzed).
	RowsEstimate int64 `json:"rows_estimate"`
	// Oldest is its oldest row by the column retention goes by, per kind of row: "settled" and
	// "unresolved" effects (updated_at), "finished" sagas and turns, "created" idempotency keys…
	// Absent for an empty table and for tables retention does not read by age.
	Oldest map[string]time.Time `json:"oldest,omitempty"`
	// Partitions names its partitions, for a history.
	Partitions []string `json:"partitions,omitempty"`
}

// PartitionStatus is one partition of a history.
type PartitionStatus struct {
	Parent string `json:"parent"`
	Name   string `json:"name"`
	// From and To bound its range [From, To): From nil from the beginning; both nil for the
	// default partition, which takes what no partition covers.
	From         *time.Time `json:"from"`
	To           *time.Time `json:"to"`
	RowsEstimate int64      `json:"rows_estimate"`
	Bytes        int64      `json:"bytes"`
	// Drop: the next run drops it; Held: it is past the audit retention but still tells of an
	// effect or saga that exists.
	Drop bool `json:"drop"`
	Held bool `json:"held"`
}

// RunRecord is a run as recorded in reckon_retention_runs.
type RunRecord struct {
	ID       int64      `json:"id"`
	Actor    string     `json:"actor"`
	DryRun   bool       `json:"dry_run"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished"`
	// State is "ok", "failed" (Error says why), "running", or "interrupted": it never finished (its
	// process died) and no run holds the lock.
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Report is what it did; nil for a run that never finished.
	Report *Report `json:"report,omitempty"`
}

// statusTables are the tables Status sizes, histories included.
var statusTables = []string{
	"reckon_effects", "reckon_effect_transitions", "reckon_sagas", "reckon_saga_steps", "reckon_saga_transitions",
	"reckon_runs", "reckon_turns", "reckon_messages", "reckon_turn_decisions", "reckon_definition_changes",
	"reckon_effect_tombstones", "reckon_idempotency_keys", "reckon_callback_signatures", "reckon_retention_runs",
	"reckon_audit_drops", "river_job",
}

// Status reads the retention status of the database. Its dry run reads the same rows as a run
// (without locking or changing any): on a large backlog it takes a while.
func (r *Retention) Status(ctx context.Context) (*Status, error) {
	q := dbsqlc.New(r.pool)
	now := r.cfg.Now()
	s := &Status{
		Now: now, EffectRetention: r.cfg.EffectRetention, AuditRetention: r.cfg.AuditRetention, EventRetention: r.cfg.EventRetention, DedupWindow: r.cfg.DedupWindow,
		IdempotencyTTL: r.cfg.IdempotencyTTL, BatchSize: r.cfg.BatchSize,
	}
	audit, err := GetAuditSettings(ctx, r.pool)
	if err != nil {
		return nil, err
	}
	s.Audit = *audit
	if s.Policies, err = ListPolicies(ctx, r.pool); err != nil {
		return nil, err
	}

	next := newReport(true, now)
	c, err := r.cutoffs(ctx, now)
	if err != nil {
		return nil, err
	}
	if next.PartitionsCreated, err = wouldCreate(ctx, q, now); err != nil {
		return nil, err
	}
	if err := r.count(ctx, c, next); err != nil {
		return nil, err
	}
	if err := r.listPartitions(ctx, now, next); err != nil {
		return nil, err
	}
	s.Next = next

	if err := r.statusPartitions(ctx, q, s); err != nil {
		return nil, err
	}
	if err := r.statusTables(ctx, q, s); err != nil {
		return nil, err
	}
	if s.Runs, err = r.statusRuns(ctx, q); err != nil {
		return nil, err
	}
	return s, nil
}

func (r *Retention) statusPartitions(ctx context.Context, q *dbsqlc.Queries, s *Status) error {
	partitions, err := q.RetentionPartitionList(ctx)
	if err != nil {
		return fmt.Errorf("retention: list the partitions: %w", err)
	}
	for _, parent := range histories {
		for _, p := range partitions {
			if p.Parent != parent {
				continue
			}
			to := p.RangeTo
			s.Partitions = append(s.Partitions, PartitionStatus{
				Parent: p.Parent, Name: p.Partition, From: p.RangeFrom, To: &to,
				Drop: slices.ContainsFunc(s.Next.PartitionsDropped, func(d DroppedPartition) bool { return d.Partition == p.Partition }),
				Held: slices.Contains(s.Next.PartitionsHeld, p.Partition),
			})
		}
		s.Partitions = append(s.Partitions, PartitionStatus{Parent: parent, Name: parent + "_default"})
	}
	names := make([]string, len(s.Partitions))
	for i, p := range s.Partitions {
		names[i] = p.Name
	}
	sizes, err := q.RetentionRelationSizes(ctx, names)
	if err != nil {
		return fmt.Errorf("retention: partition sizes: %w", err)
	}
	bySize := make(map[string]dbsqlc.RetentionRelationSizesRow, len(sizes))
	for _, size := range sizes {
		bySize[size.Name] = size
	}
	for i := range s.Partitions {
		size := bySize[s.Partitions[i].Name]
		s.Partitions[i].Bytes, s.Partitions[i].RowsEstimate = size.Bytes, size.RowsEstimate
	}
	return nil
}

func (r *Retention) statusTables(ctx context.Context, q *dbsqlc.Queries, s *Status) error {
	sizes, err := q.RetentionRelationSizes(ctx, statusTables)
	if err != nil {
		return fmt.Errorf("retention: table sizes: %w", err)
	}
	oldest, err := q.RetentionOldest(ctx)
	if err != nil {
		return fmt.Errorf("retention: oldest rows: %w", err)
	}
	for _, size := range sizes {
		t := TableStatus{Name: size.Name, Bytes: size.Bytes, RowsEstimate: size.RowsEstimate}
		for _, o := range oldest {
			if o.Name == t.Name {
				if t.Oldest == nil {
					t.Oldest = map[string]time.Time{}
				}
				t.Oldest[o.What] = o.Oldest
			}
		}
		for _, p := range s.Partitions {
			if p.Parent == t.Name {
				t.Partitions = append(t.Partitions, p.Name)
			}
		}
		s.Tables = append(s.Tables, t)
	}
	return nil
}

// statusRunsShown is how many runs Status lists.
const statusRunsShown = 10

func (r *Retention) statusRuns(ctx context.Context, q *dbsqlc.Queries) ([]RunRecord, error) {
	rows, err := q.RetentionRunRecordList(ctx, statusRunsShown)
	if err != nil {
		return nil, fmt.Errorf("retention: list the runs: %w", err)
	}
	running, err := q.RetentionLockHeld(ctx, dbsqlc.RetentionLockHeldParams{Namespace: db.AdvisoryLockNamespace, Key: db.LockKeyRetention})
	if err != nil {
		return nil, fmt.Errorf("retention: read the retention lock: %w", err)
	}
	runs := make([]RunRecord, 0, len(rows))
	for _, row := range rows {
		run := RunRecord{ID: row.ID, Actor: row.Actor, DryRun: row.DryRun, Started: row.StartedAt, Finished: row.FinishedAt}
		switch {
		case row.FinishedAt == nil && running:
			run.State = "running"
			running = false // the newest unfinished run holds the lock; older ones were interrupted
		case row.FinishedAt == nil:
			run.State = "interrupted"
		case row.Error != nil:
			run.State, run.Error = "failed", *row.Error
		default:
			run.State = "ok"
		}
		if row.FinishedAt != nil {
			var report Report
			if err := json.Unmarshal(row.Removed, &report); err == nil {
				run.Report = &report
			}
		}
		runs = append(runs, run)
	}
	return runs, nil
}
