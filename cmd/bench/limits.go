package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reckonhq/reckon/effects"
)

// Connector limits (docs/design.md, "Limits"): a connector limited by a rate and one limited by a
// cap on calls in flight, each with work waiting beside an unlimited one, on a reactor with
// River's own fetch timings (a poll a second, as in production). What is measured is what the
// limit lets through against what it allows; the target is at least 0.9 of it.
const (
	limitsRate       = 50                    // calls a second
	limitsBurst      = 5                     // of the rate
	limitsCap        = 4                     // calls in flight
	limitsCallLength = 50 * time.Millisecond // each limited call
)

// callLog records when each call of a connector started.
type callLog struct {
	mu     sync.Mutex
	starts []time.Time
}

func (l *callLog) dispatch(ctx context.Context, _ effects.Call) (json.RawMessage, error) {
	l.mu.Lock()
	l.starts = append(l.starts, time.Now())
	l.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(limitsCallLength):
	}
	return json.RawMessage(`{"ok":true}`), nil
}

// achieved is the calls a second the log shows once warm and while work still waited: between
// the calls at its 10th and 90th percentiles.
func (l *callLog) achieved() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	starts := slices.Clone(l.starts)
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	from, to := len(starts)/10, len(starts)*9/10
	if to-from < 2 {
		return 0
	}
	return float64(to-from) / starts[to].Sub(starts[from]).Seconds()
}

func (b *bench) limits(ctx context.Context) error {
	for _, run := range []struct {
		name, label string
		limit       effects.Limit
		allowed     float64 // calls a second
	}{
		{"limits-rate", fmt.Sprintf("rate-limited connector (%d/s, burst %d)", limitsRate, limitsBurst),
			effects.Limit{Rate: limitsRate, Burst: limitsBurst}, limitsRate},
		{"limits-cap", fmt.Sprintf("capped connector (%d in flight, calls of %v)", limitsCap, limitsCallLength),
			effects.Limit{MaxInFlight: limitsCap}, float64(limitsCap) / limitsCallLength.Seconds()},
	} {
		if err := b.reset(ctx); err != nil {
			return err
		}
		log := &callLog{}
		registry := benchRegistry()
		registry.MustRegister(effects.Connector{
			Name: "bench.limited", Tags: []effects.Tag{effects.TagWrite, effects.TagIdempotent}, Dispatch: log.dispatch, Limit: run.limit,
		})
		// River's own fetch timings: a held-back effect must not depend on a fast poll.
		client, err := effects.NewClient(b.pool, &effects.Config{
			Registry: registry, Logger: b.logger, Workers: b.o.workers, DispatchBatch: b.o.dispatchBatch, ClaimInterval: b.o.claimInterval,
			TracerProvider: b.tracerProvider(),
		})
		if err != nil {
			return err
		}
		// Enough limited work to wait for the whole run, and as many unlimited effects beside.
		n := max(int(run.allowed*b.o.duration.Seconds()), 50)
		start := time.Now()
		if err := b.enqueueEffects(ctx, client, "bench.limited", run.name, n); err != nil {
			return err
		}
		if err := b.enqueueEffects(ctx, client, "bench.idempotent", run.name+"-beside", n); err != nil {
			return err
		}
		b.progress("%s: %d limited and %d unlimited effects enqueued in %v", run.name, n, n, time.Since(start).Round(time.Millisecond))
		if err := b.analyze(ctx); err != nil {
			return err
		}
		started := time.Now()
		if err := client.Start(ctx); err != nil {
			return err
		}
		beside, err := b.waitDone(ctx, run.name+"-beside", `FROM reckon_effects WHERE connector = 'bench.idempotent' AND state IN ('PENDING', 'UNKNOWN')`,
			`SELECT max(updated_at) FROM reckon_effects WHERE connector = 'bench.idempotent'`)
		if err == nil {
			_, err = b.waitEffectsDone(ctx, run.name)
		}
		stopErr := client.Stop(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if stopErr != nil {
			return stopErr
		}
		got := log.achieved()
		res := result{Name: run.name, Label: run.label, Count: n, PerSecond: got,
			Extra: map[string]float64{"allowed_per_second": run.allowed, "of_limit": got / run.allowed}}
		b.results.add(res)
		b.results.add(throughput(run.name+"-beside", "unlimited connector beside "+run.name, n, beside.Sub(started)))
		b.progress("%s: %.1f calls/s of %.0f allowed (%.2f)", run.name, got, run.allowed, got/run.allowed)
	}
	return nil
}

// reportLimits prints what the limited connectors let through against their limits.
func (b *bench) reportLimits() {
	for _, name := range []string{"limits-rate", "limits-cap"} {
		if res := b.results.get(name); res != nil {
			fmt.Fprintf(b.out, "%-12s %s: %.1f calls/s of %.0f allowed = %.2f\n", name, res.Label, res.PerSecond,
				res.Extra["allowed_per_second"], res.Extra["of_limit"])
		}
	}
}
