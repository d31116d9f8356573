package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/retention"
)

// The retention scenario measures the pruning of settled effects (package retention) against the
// reactor's dispatch, in three phases that each start from emptied tables and a backlog of
// retention-backlog settled effects aged past the effect retention:
//
//   - dispatch: the reactor dispatches n pre-enqueued effects at full speed, nothing pruned;
//   - dispatch while pruning: the same, with a retention run started at the same instant;
//   - prune only: the retention run alone, nothing dispatched.
//
// The backlog is seeded with SQL, vacuumed, and written out by a CHECKPOINT before each timed
// phase (checkpoint), so that pruning finds it as it would find effects settled weeks ago: clean
// pages, none of the seed's dead row versions. Dispatch is timed from the reactor's start to the
// last effect's CONFIRMED (the database's timestamp). The prune rates count the effects the run deleted (Report.Removed[reckon_effects],
// compensations included; the backlog has none), over the run's duration. Their transitions stay:
// the history is append-only and retention drops it by whole partitions past the audit retention
// (0 here: kept). While dispatching, a run that outlasts the dispatch is stopped when the last
// effect is seen CONFIRMED (the poll's lag, up to 100 ms, is pruning alone), so that its rate is
// the one of pruning alongside dispatch; a run that empties the backlog first is timed over
// itself, and the report says so.
//
// The workload's connector is bench.idempotent, the fastest of the bench: the fastest dispatch
// is the strictest test of whether pruning keeps up.

// Settings of the scenario.
const (
	retentionConnector = "bench.idempotent"
	retentionAge       = "40 days" // the backlog's age: past the effect retention
	retentionActor     = "bench"
	retentionReason    = "retention scenario backlog"
)

// retention runs the first run and the three phases.
func (b *bench) retention(ctx context.Context) error {
	// A first run, on empty tables, makes the histories' partitions ahead, as the reactor's
	// periodic job does: the measured runs then only prune (their report says if they made any).
	if err := b.reset(ctx); err != nil {
		return err
	}
	if _, err := b.pruneBacklog(ctx); err != nil {
		return fmt.Errorf("first run: %w", err)
	}

	without, err := b.retentionDispatch(ctx, "retention-dispatch", false)
	if err != nil {
		return err
	}
	b.results.add(result{Name: "retention-dispatch", Label: "dispatch next to the aged backlog, no pruning",
		Count: b.o.n, Seconds: without.dispatch.Seconds(), PerSecond: float64(b.o.n) / without.dispatch.Seconds(),
		Extra: map[string]float64{"backlog": float64(b.o.retentionBacklog), "cpu_busy_pct": without.cpuBusy, "postgres_cores": without.postgresCores}})

	with, err := b.retentionDispatch(ctx, "retention-dispatch-pruning", true)
	if err != nil {
		return err
	}
	res := result{Name: "retention-dispatch-pruning", Label: "dispatch while retention prunes the backlog",
		Count: b.o.n, Seconds: with.dispatch.Seconds(), PerSecond: float64(b.o.n) / with.dispatch.Seconds(),
		Extra: pruneExtra(b.o.retentionBacklog, with.report)}
	res.Extra["cpu_busy_pct"], res.Extra["postgres_cores"] = with.cpuBusy, with.postgresCores
	res.Extra["backlog_finished"] = 0
	if with.finished {
		res.Extra["backlog_finished"] = 1
	}
	b.results.add(res)

	if err := b.reset(ctx); err != nil {
		return err
	}
	if err := b.seedBacklog(ctx); err != nil {
		return err
	}
	b.checkpoint(ctx)
	before, cpuErr := sampleCPU(b.name)
	alone, err := b.pruneBacklog(ctx)
	if err != nil {
		return err
	}
	after, sampleErr := sampleCPU(b.name)
	if pruned := alone.Removed[retention.TableEffects]; pruned != int64(b.o.retentionBacklog) {
		return fmt.Errorf("prune only: %d effects pruned, want the backlog's %d", pruned, b.o.retentionBacklog)
	}
	only := result{Name: "retention-prune-only", Label: "retention alone, nothing dispatched",
		Count: int(alone.Removed[retention.TableEffects]), Extra: pruneExtra(b.o.retentionBacklog, alone)}
	if cpuErr == nil && sampleErr == nil {
		only.Extra["cpu_busy_pct"], only.Extra["postgres_cores"] = before.usage(after)
	}
	b.results.add(only)
	b.progress("retention-prune-only: %d effects pruned in %v (%.0f/s)", only.Count,
		alone.Duration.Round(time.Millisecond), only.Extra["prune_per_second"])
	return nil
}

// pruneExtra is what a retention run did, for a result's Extra.
func pruneExtra(backlog int, report *retention.Report) map[string]float64 {
	pruned := report.Removed[retention.TableEffects]
	return map[string]float64{
		"backlog":            float64(backlog),
		"pruned_effects":     float64(pruned),
		"pruned_rows":        float64(report.RemovedTotal()),
		"prune_seconds":      report.Duration.Seconds(),
		"prune_per_second":   float64(pruned) / report.Duration.Seconds(),
		"partitions_created": float64(report.PartitionsCreated),
	}
}

// dispatchRun is one dispatch phase: how long the dispatch took and, with pruning, the retention
// run's report and whether it emptied the backlog (finished) before the dispatch's end was seen.
type dispatchRun struct {
	dispatch time.Duration
	// cpuBusy is how busy the machine's CPUs were over the dispatch (0–100 %), postgresCores how
	// many cores every postgres process of the server used on average.
	cpuBusy, postgresCores float64
	report                 *retention.Report
	finished               bool
}

// retentionDispatch empties the tables, seeds the backlog, enqueues n effects and times their
// dispatch by a reactor started then, with a retention run alongside if prune.
func (b *bench) retentionDispatch(ctx context.Context, name string, prune bool) (run dispatchRun, err error) {
	if err := b.reset(ctx); err != nil {
		return run, err
	}
	if err := b.seedBacklog(ctx); err != nil {
		return run, err
	}
	client, err := b.reckonClient(b.o.workers)
	if err != nil {
		return run, err
	}
	if err := b.enqueueEffects(ctx, client, retentionConnector, name, b.o.n); err != nil {
		return run, err
	}
	if err := b.analyze(ctx); err != nil {
		return run, err
	}
	b.checkpoint(ctx)

	pruneCtx, stopPruning := context.WithCancel(ctx)
	defer stopPruning()
	type pruneOutcome struct {
		report *retention.Report
		err    error
	}
	done := make(chan pruneOutcome, 1)
	before, cpuErr := sampleCPU(b.name)
	start := time.Now()
	if prune {
		go func() {
			report, err := b.pruneBacklog(pruneCtx)
			done <- pruneOutcome{report, err}
		}()
	}
	if err := client.Start(ctx); err != nil {
		return run, err
	}
	end, err := b.waitEffectsDone(ctx, name)
	if after, sampleErr := sampleCPU(b.name); sampleErr == nil && cpuErr == nil {
		run.cpuBusy, run.postgresCores = before.usage(after)
	}
	if prune && err == nil {
		// The run is stopped at once (before the reactor), so that it prunes alone no longer than
		// the poll's lag; a run that emptied the backlog is done already.
		var p pruneOutcome
		select {
		case p = <-done:
			run.finished = true
		default:
			stopPruning()
			p = <-done
			if errors.Is(p.err, context.Canceled) && ctx.Err() == nil {
				p.err = nil // stopped here, as the dispatch ended
			}
		}
		run.report, err = p.report, p.err
		if err == nil && run.report == nil {
			err = errors.New("the dispatch ended before the retention run started: raise -n")
		}
	}
	if err = errors.Join(err, client.Stop(context.WithoutCancel(ctx))); err != nil {
		return run, err
	}
	run.dispatch = end.Sub(start)
	b.progress("%s: %d effects dispatched in %v (%.0f/s)", name, b.o.n, run.dispatch.Round(time.Millisecond),
		float64(b.o.n)/run.dispatch.Seconds())
	if !prune {
		return run, nil
	}
	state := "stopped as the dispatch ended"
	if run.finished {
		state = "the backlog emptied"
	}
	pruned := run.report.Removed[retention.TableEffects]
	b.progress("%s: %d effects pruned in %v (%.0f/s), %s", name, pruned, run.report.Duration.Round(time.Millisecond),
		float64(pruned)/run.report.Duration.Seconds(), state)
	return run, nil
}

// pruneBacklog runs retention once with the default effect retention, 30 days, and batch size. A
// run that ctx ends early returns the report of what its committed batches removed, with the error.
func (b *bench) pruneBacklog(ctx context.Context) (*retention.Report, error) {
	r, err := retention.New(b.pool, &retention.Config{
		EffectRetention: retention.DefaultEffectRetention,
		// Its lines are not the bench's: a run stopped on purpose logs a failure. Run returns
		// every error.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	report, err := r.Run(ctx, &retention.RunOpts{Actor: retentionActor})
	if err != nil {
		return report, fmt.Errorf("retention run: %w", err)
	}
	return report, nil
}

// seedBacklog records the backlog with SQL, in one transaction, through the transition trigger
// as the reactor would (inserted PENDING, then CONFIRMED), and then ages it: an update of the
// timestamps alone is no transition. It vacuums reckon_effects afterwards, as autovacuum would in
// time, so that each phase starts without the seed's dead row versions.
func (b *bench) seedBacklog(ctx context.Context) error {
	start := time.Now()
	n := b.o.retentionBacklog
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO reckon_effects (id, tenant_id, connector, args, idempotency_key, policy, tags,
				transition_actor, transition_reason)
			SELECT gen_random_uuid(), $2, $3, '{"amount":1}', 'aged-' || g, 'idempotent', '{write,idempotent}', $4, $5
			FROM generate_series(1, $1::bigint) g`, n, effects.DefaultTenant, retentionConnector, retentionActor, retentionReason); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE reckon_effects SET state = 'CONFIRMED', attempts = 1, result = '{"ok":true}',
				transition_actor = $1, transition_reason = $2
			WHERE idempotency_key LIKE 'aged-%'`, retentionActor, retentionReason); err != nil {
			return fmt.Errorf("confirm: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE reckon_effects SET created_at = now() - interval '`+retentionAge+`',
				updated_at = now() - interval '`+retentionAge+`'
			WHERE idempotency_key LIKE 'aged-%'`); err != nil {
			return fmt.Errorf("age: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed the backlog: %w", err)
	}
	if _, err := b.pool.Exec(ctx, `VACUUM (ANALYZE) reckon_effects`); err != nil {
		return fmt.Errorf("vacuum the backlog: %w", err)
	}
	b.progress("retention: %d settled effects aged %s seeded in %v", n, retentionAge, time.Since(start).Round(time.Millisecond))
	return nil
}

// checkpoint runs a CHECKPOINT before a timed phase, so that each starts alike: right after one,
// when the first change of every page writes a full-page image to the WAL. The seed writes much
// WAL, which would otherwise bring a checkpoint (max_wal_size) at a moment of chance. It needs
// the privilege (superuser or pg_checkpoint); without it, the phases go on as they are.
func (b *bench) checkpoint(ctx context.Context) {
	if _, err := b.pool.Exec(ctx, `CHECKPOINT`); err != nil {
		b.progress("retention: no CHECKPOINT before the phase (%v)", err)
	}
}

// reportRetention prints the retention section, and adds its ratios and targets.
func (b *bench) reportRetention() {
	r := &b.results
	without, with, alone := r.get("retention-dispatch"), r.get("retention-dispatch-pruning"), r.get("retention-prune-only")
	if without == nil || with == nil || alone == nil {
		return
	}
	kept := ratio(with.PerSecond, without.PerSecond)
	prune := with.Extra["prune_per_second"]
	overA, overB := ratio(prune, without.PerSecond), ratio(prune, with.PerSecond)
	r.Ratios["retention-dispatch-pruning/retention-dispatch"] = kept
	r.Ratios["retention prune while dispatching/retention-dispatch"] = overA
	r.Ratios["retention prune while dispatching/retention-dispatch-pruning"] = overB
	r.Ratios["retention-prune-only/retention-dispatch"] = ratio(alone.Extra["prune_per_second"], without.PerSecond)
	state := "stopped as the dispatch ended"
	if with.Extra["backlog_finished"] == 1 {
		state = "the backlog emptied before the dispatch ended: rate over the prune run"
	}
	fmt.Fprintf(b.out, "\nRETENTION: a backlog of %.0f settled effects aged %s, effect retention 30 days, batches of %d; effects pruned (their transitions stay, in the history)\n",
		with.Extra["backlog"], retentionAge, retention.DefaultBatchSize)
	fmt.Fprintf(b.out, "  dispatch, no pruning        %8.0f effects/s   CPUs %.0f%% busy, Postgres %.2f of %d cores\n",
		without.PerSecond, without.Extra["cpu_busy_pct"], without.Extra["postgres_cores"], runtime.NumCPU())
	fmt.Fprintf(b.out, "  dispatch while pruning      %8.0f effects/s   %.2f of it without; CPUs %.0f%% busy, Postgres %.2f cores\n",
		with.PerSecond, kept, with.Extra["cpu_busy_pct"], with.Extra["postgres_cores"])
	fmt.Fprintf(b.out, "  pruned while dispatching    %8.0f effects/s   %.0f in %.2f s (%s); %.2f × dispatch without pruning, %.2f × with\n",
		prune, with.Extra["pruned_effects"], with.Extra["prune_seconds"], state, overA, overB)
	fmt.Fprintf(b.out, "  pruned alone                %8.0f effects/s   %.0f in %.2f s; CPUs %.0f%% busy, Postgres %.2f cores\n",
		alone.Extra["prune_per_second"], alone.Extra["pruned_effects"], alone.Extra["prune_seconds"],
		alone.Extra["cpu_busy_pct"], alone.Extra["postgres_cores"])
	// With the CPUs saturated by the dispatch alone, pruning can only run on a share of them: the
	// goal says so, and is judged all the same.
	goal := "pruning costs ≤ 10% of dispatch throughput"
	if busy := without.Extra["cpu_busy_pct"]; busy >= saturatedPct {
		goal = fmt.Sprintf("%s (CPUs %.0f%% busy without pruning: saturated)", goal, busy)
	}
	r.Targets = append(r.Targets,
		target{Goal: goal, Measured: "retention-dispatch-pruning/retention-dispatch", Value: kept, Met: kept >= 0.9},
		target{Goal: "pruning ≥ 5 × the dispatch rate", Measured: "prune rate while dispatching/retention-dispatch", Value: overA, Met: overA >= 5})
}
