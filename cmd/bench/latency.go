package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/reckonhq/reckon/effects"
)

// latency enqueues single effects open-loop — on a schedule, not waiting for the previous one —
// at 1% (effects mostly alone), 25% and 50% of the workload's maximum rate, with an in-process reactor working, and reads
// enqueue → CONFIRMED percentiles from the database's own timestamps. The workload is
// single-effect transactions with a reactor dispatching them on the same machine; its maximum
// rate is measured first, in the same run (latencyMaxRate), after River's same workload
// (e2eRiverRate), which it is compared with.
func (b *bench) latency(ctx context.Context) error {
	if err := b.e2eRiverRate(ctx); err != nil {
		return err
	}
	maxRate, err := b.latencyMaxRate(ctx)
	if err != nil {
		return err
	}
	for _, share := range []float64{0.01, 0.25, 0.50} {
		client, err := b.resetClient(ctx, b.o.workers)
		if err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return err
		}
		rate := maxRate * share
		sent, err := b.openLoop(ctx, client, rate)
		if err == nil {
			_, err = b.waitEffectsDone(ctx, "latency")
		}
		stopErr := client.Stop(context.WithoutCancel(ctx))
		if err = errors.Join(err, stopErr); err != nil {
			return err
		}
		var p50, p95, p99 float64
		err = b.pool.QueryRow(ctx, `
			SELECT percentile_cont(0.50) WITHIN GROUP (ORDER BY ms),
			       percentile_cont(0.95) WITHIN GROUP (ORDER BY ms),
			       percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)
			FROM (SELECT extract(epoch FROM t.at - e.created_at) * 1000 AS ms
			      FROM reckon_effects e
			      JOIN reckon_effect_transitions t ON t.effect_id = e.id AND t.to_state = 'CONFIRMED') l`).Scan(&p50, &p95, &p99)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("latency-%d", int(share*100))
		b.results.add(result{Name: name, Label: fmt.Sprintf("enqueue → CONFIRMED at %.0f%% load (%.0f/s)", share*100, rate),
			Count: sent, Extra: map[string]float64{"rate": rate, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99}})
		b.progress("%s: %d effects at %.0f/s: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms", name, sent, rate, p50, p95, p99)
	}
	return nil
}

// openLoop enqueues one effect per transaction at rate per second for the run's duration, spread
// over C goroutines that each keep their own schedule.
func (b *bench) openLoop(ctx context.Context, client *effects.Client, rate float64) (int, error) {
	interval := time.Duration(float64(time.Second) * float64(b.o.concurrency) / rate)
	deadline := time.Now().Add(b.o.duration)
	var (
		mu       sync.Mutex
		sent     int
		firstErr error
		wg       sync.WaitGroup
	)
	for g := range b.o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(interval * time.Duration(g) / time.Duration(b.o.concurrency))
			for i := 0; next.Before(deadline) && ctx.Err() == nil; i++ {
				time.Sleep(time.Until(next))
				next = next.Add(interval)
				_, err := client.Enqueue(ctx, benchSpec("bench.full", fmt.Sprintf("lat-%d-%d", g, i)), nil)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				sent++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sent, firstErr
}

// The end-to-end closed-loop workload of the latency scenario, for River and for Reckon: C
// goroutines each commit one job (InsertTx) or one effect (EnqueueTx) per transaction, the next
// after the previous commit, for the run's duration, while a client with the run's River settings
// (riverClient, reckonClient: the same workers, fetch cooldown and poll interval) works them — River
// with a no-op worker, Reckon's reactor with the full protocol's connector. Each rate is the lower
// of what was inserted and what was completed in that window.
const (
	e2eRiverQueue = "bench_e2e"
	e2eRiver      = "e2e-river"
	e2eReckon     = "e2e-reckon"
)

// e2eRiverRate measures River's end-to-end workload: producers doing InsertTx of one no-op job
// per transaction while a River client works them.
func (b *bench) e2eRiverRate(ctx context.Context) (err error) {
	if err := b.reset(ctx); err != nil {
		return err
	}
	client, err := b.riverClient(ctx, noopWorkers(), e2eRiverQueue)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, client.Stop(context.WithoutCancel(ctx))) }()
	_, err = b.closedLoopE2E(ctx, e2eRiver, "River InsertTx, one job per transaction, while a River client works them (closed loop)",
		func(tx pgx.Tx) error {
			_, err := client.InsertTx(ctx, tx, noopArgs{}, &river.InsertOpts{Queue: e2eRiverQueue})
			return err
		},
		`SELECT count(*) FROM river_job WHERE queue = '`+e2eRiverQueue+`' AND state = 'completed' AND finalized_at <= $1`,
		func() error {
			_, err := b.waitDone(ctx, e2eRiver, `FROM river_job WHERE queue = '`+e2eRiverQueue+`' AND state <> 'completed'`, `SELECT now()`)
			return err
		})
	return err
}

// latencyMaxRate measures the latency workload's maximum rate closed-loop (e2eReckon): C goroutines
// commit single-effect EnqueueTx transactions as fast as they can for the run's duration while the
// reactor dispatches, and the rate is the lower of what was enqueued and what was confirmed in that
// window. (The two stages measured apart — EnqueueTx alone, the full protocol alone — overstate it:
// on one machine they share the CPUs, and half of the sum of their separate maxima is not half
// load.)
func (b *bench) latencyMaxRate(ctx context.Context) (rate float64, err error) {
	client, err := b.resetClient(ctx, b.o.workers)
	if err != nil {
		return 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, client.Stop(context.WithoutCancel(ctx))) }()
	var seq atomic.Int64
	return b.closedLoopE2E(ctx, e2eReckon, "Reckon EnqueueTx, one effect per transaction, while the reactor dispatches (closed loop)",
		func(tx pgx.Tx) error {
			_, err := client.EnqueueTx(ctx, tx, benchSpec("bench.full", fmt.Sprintf("max-%d", seq.Add(1))), nil)
			return err
		},
		`SELECT count(*) FROM reckon_effect_transitions WHERE to_state = 'CONFIRMED' AND at <= $1`,
		func() error {
			_, err := b.waitEffectsDone(ctx, e2eReckon)
			return err
		})
}

// closedLoopE2E runs insert closed-loop (closedLoop) with a client already working, counts with
// completedSQL what was completed by the end of the window (its $1), waits with drain until the
// rest is worked off, and records the result name: the lower of the inserted and the completed
// rate, both in its extras.
func (b *bench) closedLoopE2E(ctx context.Context, name, label string, insert func(pgx.Tx) error, completedSQL string, drain func() error) (float64, error) {
	var (
		from, to   time.Time
		count, got int
		elapsed    time.Duration
	)
	err := b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&from)
	if err == nil {
		count, elapsed, err = b.closedLoop(ctx, insert)
	}
	if err == nil {
		err = b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&to)
	}
	if err == nil {
		err = b.pool.QueryRow(ctx, completedSQL, to).Scan(&got)
	}
	if err == nil {
		err = drain()
	}
	if err != nil {
		return 0, err
	}
	inserted, completed := float64(count)/elapsed.Seconds(), float64(got)/to.Sub(from).Seconds()
	rate := min(inserted, completed)
	b.results.add(result{Name: name, Label: label, Count: count, Seconds: elapsed.Seconds(), PerSecond: rate,
		Extra: map[string]float64{"inserted_per_s": inserted, "completed_per_s": completed}})
	b.progress("%s: %.0f/s (inserted %.0f/s, completed %.0f/s in the same window)", name, rate, inserted, completed)
	return rate, nil
}
