package main

import (
	"context"
	"fmt"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing modes of -tracing: off (Reckon's default: the global no-op provider), memory (every
// Reckon client of the run, in this process and in the reactor processes, with an SDK provider
// exporting to an in-memory exporter), or both (each scenario twice, off then on, and their
// ratio).
const (
	tracingOff    = "off"
	tracingMemory = "memory"
	tracingBoth   = "both"
)

// tracingSuffix marks the results of a scenario run with tracing on.
const tracingSuffix = "+tracing"

// spanCounter is the in-memory exporter: it counts the spans exported and drops them. (tracetest's
// InMemoryExporter keeps every span; over a run of hundreds of thousands that would measure the
// heap it grows, not tracing.) The spans are made, sampled, batched and handed over exactly as to
// a real exporter; only the encoding and the network are left out.
type spanCounter struct{ spans atomic.Int64 }

var _ sdktrace.SpanExporter = (*spanCounter)(nil)

func (c *spanCounter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.spans.Add(int64(len(spans)))
	return nil
}

func (c *spanCounter) Shutdown(context.Context) error { return nil }

// newMemoryTracing returns a provider with the SDK's defaults (parent-based always-on sampling, a
// batch span processor with its default queue and schedule) over a spanCounter.
func newMemoryTracing() (*sdktrace.TracerProvider, *spanCounter) {
	counter := &spanCounter{}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(counter)), counter
}

// tracingPasses are the tracing modes each scenario runs in, in order.
func tracingPasses(mode string) []string {
	if mode == tracingBoth {
		return []string{tracingOff, tracingMemory}
	}
	return []string{mode}
}

// tracerProvider is what the run's Reckon clients get as effects.Config.TracerProvider: nil (the
// default, the global no-op provider) with tracing off.
func (b *bench) tracerProvider() trace.TracerProvider {
	if b.tracing == nil {
		return nil
	}
	return b.tracing
}

// runScenarioTraced runs scenario once per pass of -tracing. A pass with tracing on gets a fresh
// provider, whose spans are flushed at its end and counted (those of the reactor processes too),
// and its results are named with tracingSuffix.
func (b *bench) runScenarioTraced(ctx context.Context, scenario string) error {
	for _, mode := range tracingPasses(b.o.tracing) {
		if mode == tracingOff {
			b.progress("== %s", scenario)
			if err := b.runScenario(ctx, scenario); err != nil {
				return err
			}
			continue
		}
		b.progress("== %s, tracing on (in-memory exporter)", scenario)
		provider, counter := newMemoryTracing()
		b.tracing, b.spans = provider, counter
		first := len(b.results.Results)
		err := b.runScenario(ctx, scenario)
		flushErr := provider.Shutdown(context.WithoutCancel(ctx))
		b.tracing, b.spans = nil, nil
		if err != nil {
			return err
		}
		if flushErr != nil {
			return fmt.Errorf("tracing: %w", flushErr)
		}
		for i := first; i < len(b.results.Results); i++ {
			res := &b.results.Results[i]
			res.Name += tracingSuffix
			res.Label += " (tracing on)"
		}
		if b.results.Spans == nil {
			b.results.Spans = map[string]int64{}
		}
		b.results.Spans[scenario] = counter.spans.Load()
		b.progress("%s: %d spans exported with tracing on", scenario, counter.spans.Load())
	}
	return nil
}

// reportTracing prints, for each result also run with tracing on, the ratio on/off of its rate
// (and of its p99 latency, where it has one), and records them in the ratios.
func (b *bench) reportTracing() {
	b.reportRatios("TRACING on (in-memory exporter) / off, same run", tracingSuffix, true,
		" throughput %.0f/s on, %.0f/s off: %.3f", "  p99 %.1f ms on, %.1f ms off: %.2f")
}
