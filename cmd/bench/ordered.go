package main

import (
	"context"
	"fmt"
	"time"

	"github.com/reckonhq/reckon/effects"
)

// orderedRuns are the passes of the ordered scenario: how many ordering keys the effects are spread
// over (0: unordered, the reference), and at most how many effects the pass dispatches (a key's
// effects go one at a time, so one key gets fewer than -n).
var orderedRuns = []struct {
	keys, maxN int
}{
	{0, 1 << 30},
	{1, 1000},
	{100, 20000},
	{10000, 1 << 30},
}

// ordered dispatches effects of the idempotent no-op connector spread over 1, 100 and 10,000
// ordering keys (docs/design.md, "Ordering keys"), enqueued in batches before the reactor starts,
// beside the same effects unordered: the throughput of each, and its ratio to the unordered one.
func (b *bench) ordered(ctx context.Context) error {
	for _, run := range orderedRuns {
		n := min(b.o.n, run.maxN)
		name, label := "ordered-unordered", "Reckon, unordered (the ordered runs' reference)"
		if run.keys > 0 {
			name, label = fmt.Sprintf("ordered-%d", run.keys), fmt.Sprintf("Reckon, ordered, %d keys (%d effects)", run.keys, n)
		}
		client, err := b.resetClient(ctx, b.o.workers)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := b.enqueueOrdered(ctx, client, name, n, run.keys); err != nil {
			return err
		}
		b.progress("%s: %d effects enqueued in %v", name, n, time.Since(start).Round(time.Millisecond))
		if err := b.analyze(ctx); err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return err
		}
		end, err := b.waitEffectsDone(ctx, name)
		stopErr := client.Stop(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if stopErr != nil {
			return stopErr
		}
		b.results.add(throughput(name, label, n, end.Sub(start)))
	}
	return nil
}

// enqueueOrdered records n effects, the i-th with ordering key i mod keys (none when keys is 0),
// in batches.
func (b *bench) enqueueOrdered(ctx context.Context, client *effects.Client, prefix string, n, keys int) error {
	return b.enqueueSpecs(ctx, client, n, func(i int) effects.Spec {
		spec := benchSpec("bench.idempotent", fmt.Sprintf("%s-%d", prefix, i))
		if keys > 0 {
			spec.OrderingKey = fmt.Sprintf("key-%d", i%keys)
		}
		return spec
	})
}

// reportOrdered prints each ordered run's throughput against the unordered reference's, and
// records the ratios.
func (b *bench) reportOrdered() {
	r := &b.results
	base := r.rate("ordered-unordered")
	if base == 0 {
		return
	}
	fmt.Fprintln(b.out, "\nOrdering keys: effects/s ordered vs unordered (one key's effects go one at a time)")
	for _, run := range orderedRuns[1:] {
		name := fmt.Sprintf("ordered-%d", run.keys)
		if rate := r.rate(name); rate > 0 {
			r.Ratios[name+"/ordered-unordered"] = rate / base
			fmt.Fprintf(b.out, "  %-8s keys %10.0f/s   unordered %10.0f/s   ratio %.3f\n", fmt.Sprint(run.keys), rate, base, rate/base)
		}
	}
}
