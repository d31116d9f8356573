package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/reckonhq/reckon/effects"
)

// latency enqueues single effects open-loop — on a schedule, not waiting for the previous one —
// at 25% and 50% of the workload's maximum rate, with an in-process reactor working, and reads
// enqueue → CONFIRMED percentiles from the database's own timestamps. The workload is
// single-effect transactions with a reactor dispatching them on the same machine; its maximum
// rate is measured first, in the same run (latencyMaxRate).
func (b *bench) latency(ctx context.Context) error {
	maxRate, err := b.latencyMaxRate(ctx)
	if err != nil {
		return err
	}
	for _, share := range []float64{0.25, 0.50} {
		if err := b.reset(ctx); err != nil {
			return err
		}
		client, err := b.reckonClient(b.o.workers)
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

// latencyMaxRate measures the latency workload's maximum rate closed-loop: C goroutines commit
// single-effect EnqueueTx transactions as fast as they can for the run's duration while the
// reactor dispatches, and the rate is the lower of what was enqueued and what was confirmed in
// that window. (The two stages measured apart — EnqueueTx alone, the full protocol alone —
// overstate it: on one machine they share the CPUs, and half of the sum of their separate maxima
// is not half load.)
func (b *bench) latencyMaxRate(ctx context.Context) (float64, error) {
	if err := b.reset(ctx); err != nil {
		return 0, err
	}
	client, err := b.reckonClient(b.o.workers)
	if err != nil {
		return 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	var (
		seq              atomic.Int64
		from, to         time.Time
		count, confirmed int
		elapsed          time.Duration
	)
	err = b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&from)
	if err == nil {
		count, elapsed, err = b.closedLoop(ctx, func(tx pgx.Tx) error {
			_, err := client.EnqueueTx(ctx, tx, benchSpec("bench.full", fmt.Sprintf("max-%d", seq.Add(1))), nil)
			return err
		})
	}
	if err == nil {
		err = b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&to)
	}
	if err == nil {
		err = b.pool.QueryRow(ctx, `SELECT count(*) FROM reckon_effect_transitions WHERE to_state = 'CONFIRMED' AND at <= $1`, to).Scan(&confirmed)
	}
	if err == nil {
		_, err = b.waitEffectsDone(ctx, "latency-max")
	}
	if err = errors.Join(err, client.Stop(context.WithoutCancel(ctx))); err != nil {
		return 0, err
	}
	enqueued, done := float64(count)/elapsed.Seconds(), float64(confirmed)/to.Sub(from).Seconds()
	rate := min(enqueued, done)
	b.results.add(result{Name: "latency-max", Label: "single-effect EnqueueTx while the reactor dispatches (closed loop)",
		Count: count, Seconds: elapsed.Seconds(), PerSecond: rate, Extra: map[string]float64{"enqueued_per_s": enqueued, "confirmed_per_s": done}})
	b.progress("latency: maximum rate %.0f/s (enqueued %.0f/s, confirmed %.0f/s in the same window)", rate, enqueued, done)
	return rate, nil
}
