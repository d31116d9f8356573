package effects

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/dbsqlc"
)

// Tracing (docs/design.md, "Tracing"). The span that enqueues an effect is a child of the caller's;
// its trace context — the propagator's carrier, {"traceparent": …} — is stored on the effect's row
// (reckon_effects.trace_context). Every later span about the effect (dispatch, the connector's
// call, reconciliation, compensation, callback, deadline, an operator's decision) is made in that
// trace, whichever process makes it and however late: it is a child of the context it runs in when
// that is the same trace (a River job inserted under the effect's span), otherwise of the stored
// context, with a link to the span it runs in. Without a valid span in the enqueuing context
// (tracing off) nothing is stored, and no span records anything.

// TracerName is the name of the tracer of package effects (its instrumentation scope).
const TracerName = "github.com/reckonhq/reckon/effects"

// Span names. Short and stable: dashboards and tests select on them.
const (
	spanEnqueue             = "reckon.enqueue"
	spanDo                  = "reckon.do"
	spanDispatch            = "reckon.dispatch"
	spanConnectorDispatch   = "reckon.connector.dispatch"
	spanConnectorCompensate = "reckon.connector.compensate"
	spanReconcile           = "reckon.reconcile"
	spanStatusCheck         = "reckon.connector.status_check"
	spanCompensate          = "reckon.compensate"
	spanCallback            = "reckon.callback"
	spanDeadline            = "reckon.deadline"
	spanConnectorCancel     = "reckon.connector.cancel"
	spanResolve             = "reckon.resolve"
	spanCancel              = "reckon.cancel"
	spanRedrive             = "reckon.redrive"
	spanRiverWorkPrefix     = "river.work "
)

// Span attributes.
const (
	attrEffectID    = attribute.Key("reckon.effect.id")
	attrEffectCount = attribute.Key("reckon.effect.count")
	attrConnector   = attribute.Key("reckon.connector")
	attrTenant      = attribute.Key("reckon.tenant")
	attrAttempt     = attribute.Key("reckon.attempt")
	attrOutcome     = attribute.Key("reckon.outcome")
	attrCompensates = attribute.Key("reckon.compensates.id")
	attrFencedOut   = attribute.Key("reckon.fenced_out")
	attrJobID       = attribute.Key("river.job.id")
	attrJobKind     = attribute.Key("river.job.kind")
	attrJobQueue    = attribute.Key("river.queue")
	attrJobAttempt  = attribute.Key("river.attempt")
)

// Span options made once: passing a slice that exists allocates nothing, which keeps a span that
// records nothing (tracing off) cheap.
var (
	producerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	clientSpan   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
)

// jobTraceKey is the key of a River job's metadata under which tracingMiddleware stores the trace
// context of the span that inserted the job.
const jobTraceKey = "reckon:trace_context"

// defaultPropagator is Config.Propagator's default: W3C Trace Context and Baggage.
func defaultPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// tracing holds a Client's tracer and propagator.
type tracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

func newTracing(provider trace.TracerProvider, propagator propagation.TextMapPropagator) *tracing {
	return &tracing{tracer: provider.Tracer(TracerName), propagator: propagator}
}

// carrierOf returns the trace context of ctx's span as the propagator's carrier in JSON, for an
// effect's row or a job's metadata; nil when ctx carries no valid span (tracing off), so that
// nothing is stored then.
func (t *tracing) carrierOf(ctx context.Context) json.RawMessage {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	t.propagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	raw, err := json.Marshal(carrier)
	if err != nil {
		return nil
	}
	return raw
}

// stored returns the context a stored carrier describes (its span as a remote parent, and its
// baggage), or nil when raw is empty or holds no valid span.
func (t *tracing) stored(raw json.RawMessage) context.Context {
	if len(raw) == 0 {
		return nil
	}
	var carrier propagation.MapCarrier
	if err := json.Unmarshal(raw, &carrier); err != nil {
		return nil
	}
	ctx := t.propagator.Extract(context.Background(), carrier)
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	return ctx
}

// continueTrace returns ctx made to continue the trace stored in raw: ctx itself when its span is
// already in that trace (or nothing is stored), else ctx with the stored span as its remote parent
// and the stored baggage, and a link to ctx's own span (if any) for the span started next.
func (t *tracing) continueTrace(ctx context.Context, raw json.RawMessage) (context.Context, []trace.Link) {
	stored := t.stored(raw)
	if stored == nil {
		return ctx, nil
	}
	current := trace.SpanContextFromContext(ctx)
	parent := trace.SpanContextFromContext(stored)
	if current.IsValid() && current.TraceID() == parent.TraceID() {
		return ctx, nil
	}
	var links []trace.Link
	if current.IsValid() {
		links = []trace.Link{{SpanContext: current}}
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	if b := baggage.FromContext(stored); b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	return ctx, links
}

// startEffectSpan starts a span about one effect in the effect's own trace (continueTrace), with
// the effect's attributes.
func (c *Client) startEffectSpan(ctx context.Context, name string, row dbsqlc.ReckonEffect) (context.Context, trace.Span) {
	ctx, links := c.tracing.continueTrace(ctx, row.TraceContext)
	var span trace.Span
	if links == nil {
		ctx, span = c.tracing.tracer.Start(ctx, name)
	} else {
		ctx, span = c.tracing.tracer.Start(ctx, name, trace.WithLinks(links...))
	}
	if span.IsRecording() {
		span.SetAttributes(effectAttributes(row)...)
	}
	return ctx, span
}

// workInEffectSpan runs work on row, an effect of job, in the effect's span (startEffectSpan) named
// name, which also carries the job's id and attempt and ends with work's outcome. The dispatch, the
// reconciliation and the async deadline of an effect run here.
func workInEffectSpan[T river.JobArgs](ctx context.Context, c *Client, name string, job *river.Job[T], row dbsqlc.ReckonEffect,
	work func(context.Context, trace.Span, *river.Job[T], dbsqlc.ReckonEffect) error,
) error {
	ctx, span := c.startEffectSpan(ctx, name, row)
	if span.IsRecording() {
		span.SetAttributes(attrJobID.Int64(job.ID), attrJobAttempt.Int(job.Attempt))
	}
	err := work(ctx, span, job, row)
	endSpan(span, failure(err))
	return err
}

// startCallSpan starts the span of a call to the connector — a client span, child of ctx's.
func (c *Client) startCallSpan(ctx context.Context, name string, row dbsqlc.ReckonEffect) (context.Context, trace.Span) {
	ctx, span := c.tracing.tracer.Start(ctx, name, clientSpan...)
	if span.IsRecording() {
		span.SetAttributes(effectAttributes(row)...)
	}
	return ctx, span
}

func effectAttributes(row dbsqlc.ReckonEffect) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attrEffectID.String(row.ID.String()),
		attrConnector.String(row.Connector),
		attrTenant.String(row.TenantID),
		attrAttempt.Int(int(row.Attempts) + 1),
	}
	if row.CompensatesID != nil {
		attrs = append(attrs, attrCompensates.String(row.CompensatesID.String()))
	}
	return attrs
}

// failed reports whether a connector's answer is a failure for the spans: a failed, retryable or
// unknown outcome (an accepted one is not).
func (k outcomeKind) failed() bool {
	return k == outcomeFailed || k == outcomeRetry || k == outcomeUnknown
}

// endSpan ends span with err, if any, as its error status.
func endSpan(span trace.Span, err error) {
	recordError(span, err)
	span.End()
}

// recordError sets err, if any, as span's error status.
func recordError(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// setOutcome records what became of the work a span covers: outcome as an attribute, and an error
// status with err's text when failed.
func setOutcome(span trace.Span, outcome string, failed bool, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(outcome))
	if failed {
		msg := outcome
		if err != nil {
			msg = err.Error()
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, msg)
	}
}

// tracingMiddleware is the River middleware of a Client, installed first in River's
// Config.Middleware (before Config.RiverMiddleware). As JobInsertMiddleware it stores the trace
// context of the inserting span in each job's metadata (jobTraceKey), when there is one; as
// WorkerMiddleware it makes a span "river.work {kind}" for every job worked, a child of that stored
// context (a root span when none is stored), which the worker's own spans continue.
type tracingMiddleware struct {
	river.MiddlewareDefaults
	tracing *tracing
}

var (
	_ rivertype.JobInsertMiddleware = (*tracingMiddleware)(nil)
	_ rivertype.WorkerMiddleware    = (*tracingMiddleware)(nil)
)

func (m *tracingMiddleware) InsertMany(ctx context.Context, manyParams []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	if carrier := m.tracing.carrierOf(ctx); carrier != nil {
		for _, params := range manyParams {
			params.Metadata = withMetadata(params.Metadata, jobTraceKey, carrier)
		}
	}
	return doInner(ctx)
}

// withMetadata returns a job's metadata (a JSON object) with key set to value. Metadata that is
// not an object is left as it is.
func withMetadata(metadata []byte, key string, value json.RawMessage) []byte {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(metadata)) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil {
			return metadata
		}
	}
	fields[key] = value
	out, err := json.Marshal(fields)
	if err != nil {
		return metadata
	}
	return out
}

func (m *tracingMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if raw := jobTraceContext(job.Metadata); raw != nil {
		if stored := m.tracing.stored(raw); stored != nil {
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.SpanContextFromContext(stored))
			if b := baggage.FromContext(stored); b.Len() > 0 {
				ctx = baggage.ContextWithBaggage(ctx, b)
			}
		}
	}
	ctx, span := m.tracing.tracer.Start(ctx, spanRiverWorkPrefix+job.Kind, consumerSpan...)
	if span.IsRecording() {
		span.SetAttributes(attrJobID.Int64(job.ID), attrJobKind.String(job.Kind), attrJobQueue.String(job.Queue),
			attrJobAttempt.Int(job.Attempt))
	}
	err := doInner(ctx)
	if span.IsRecording() {
		switch {
		case err == nil:
			span.SetAttributes(attrOutcome.String("completed"))
		case failure(err) == nil:
			span.SetAttributes(attrOutcome.String("snoozed"))
		}
	}
	endSpan(span, failure(err))
	return err
}

// jobTraceContext returns the carrier stored in a job's metadata, or nil. A job inserted without
// a span has none, and costs a byte search.
func jobTraceContext(metadata []byte) json.RawMessage {
	if !bytes.Contains(metadata, []byte(`"`+jobTraceKey+`"`)) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &fields); err != nil {
		return nil
	}
	return fields[jobTraceKey]
}
