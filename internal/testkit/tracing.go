package testkit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is an OpenTelemetry SDK TracerProvider, sampling everything, that keeps every ended span
// in memory, for tests of traces: pass it as effects.Config.TracerProvider.
type Tracer struct {
	*sdktrace.TracerProvider
	exporter *tracetest.InMemoryExporter
}

// NewTracer returns a Tracer, shut down when the test ends.
func NewTracer(tb testing.TB) *Tracer {
	tb.Helper()
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tb.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return &Tracer{TracerProvider: provider, exporter: exporter}
}

// Spans returns the spans ended so far, in the order they ended.
func (t *Tracer) Spans() tracetest.SpanStubs { return t.exporter.GetSpans() }

// Find returns the ended spans named name for which match holds (nil: every one).
func (t *Tracer) Find(name string, match func(tracetest.SpanStub) bool) []tracetest.SpanStub {
	var found []tracetest.SpanStub
	for _, s := range t.Spans() {
		if s.Name == name && (match == nil || match(s)) {
			found = append(found, s)
		}
	}
	return found
}

// WaitSpan waits up to 10s for an ended span named name for which match holds (nil: any) and
// returns the first; none fails the test, listing the spans there are.
func (t *Tracer) WaitSpan(tb testing.TB, name string, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if found := t.Find(name, match); len(found) > 0 {
			return found[0]
		}
		if time.Now().After(deadline) {
			require.FailNow(tb, "span not found", "no span %q matching; spans:\n%s", name, DescribeSpans(t.Spans()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// OfEffect matches the spans whose reckon.effect.id is id.
func OfEffect(id uuid.UUID) func(tracetest.SpanStub) bool {
	return func(s tracetest.SpanStub) bool { return SpanAttr(s, "reckon.effect.id") == id.String() }
}

// SpanAttr returns the span's attribute key as text ("" when it has none).
func SpanAttr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// Traceparent parses a W3C traceparent header "00-{trace id}-{span id}-{flags}"; a malformed one
// fails the test.
func Traceparent(tb testing.TB, header string) (trace.TraceID, trace.SpanID) {
	tb.Helper()
	parts := strings.Split(header, "-")
	require.Len(tb, parts, 4, "traceparent %q", header)
	traceID, err := trace.TraceIDFromHex(parts[1])
	require.NoError(tb, err, "traceparent %q", header)
	spanID, err := trace.SpanIDFromHex(parts[2])
	require.NoError(tb, err, "traceparent %q", header)
	return traceID, spanID
}

// DescribeSpans lists spans one per line, for failure messages.
func DescribeSpans(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s trace=%s span=%s parent=%s effect=%s links=%d\n", s.Name, s.SpanContext.TraceID(),
			s.SpanContext.SpanID(), s.Parent.SpanID(), SpanAttr(s, "reckon.effect.id"), len(s.Links))
	}
	return b.String()
}
