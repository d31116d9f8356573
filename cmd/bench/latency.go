package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/reckonhq/reckon/effects"
)

// latency enqueues single effects open-loop — on a schedule, not waiting for the previous one —
// at 25% and 50% of the workload's measured maximum rate, with an in-process reactor working, and
// reads enqueue → CONFIRMED percentiles from the database's own timestamps. The workload is
// single-effect transactions plus dispatch, so its maximum rate is the slower of the two stages:
// the full protocol's throughput and single-effect EnqueueTx transactions per second.
func (b *bench) latency(ctx context.Context) error {
	if b.results.rate("reckon-full") == 0 {
		b.progress("latency: measuring the full protocol's rate first")
		if err := b.reckon(ctx); err != nil {
			return err
		}
	}
	if b.results.rate("enqueue-reckon") == 0 {
		b.progress("latency: measuring single-effect enqueue first")
		if err := b.enqueue(ctx); err != nil {
			return err
		}
	}
	maxRate := min(b.results.rate("reckon-full"), b.results.rate("enqueue-reckon"))
	b.progress("latency: maximum rate %.0f/s (full protocol %.0f/s, single-effect enqueue %.0f/s)",
		maxRate, b.results.rate("reckon-full"), b.results.rate("enqueue-reckon"))
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
				_, err := client.Enqueue(ctx, effects.Spec{Connector: "bench.full",
					IdempotencyKey: fmt.Sprintf("lat-%d-%d", g, i), Args: json.RawMessage(`{"amount":1}`)}, nil)
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
