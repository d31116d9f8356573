package saga

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing. A saga's trace is the trace of the span that started it: reckon.saga.start is a child of
// the caller's span, and its first step's effect stores that trace (effects: reckon.enqueue). Each
// later move of the saga happens in the settle hook of one of its effects, inside that effect's
// span (its dispatch, reconciliation or callback, in the effect's trace), so reckon.saga.step and
// reckon.saga.compensation, and the effects they enqueue, stay in the saga's trace. The spans come
// from the effects client's TracerProvider (effects.Config.TracerProvider).

// TracerName is the name of the tracer of package saga (its instrumentation scope).
const TracerName = "github.com/reckonhq/reckon/saga"

const (
	spanStart        = "reckon.saga.start"
	spanStep         = "reckon.saga.step"
	spanCompensation = "reckon.saga.compensation"
	spanResolve      = "reckon.saga.resolve"

	attrSagaID   = attribute.Key("reckon.saga.id")
	attrSagaName = attribute.Key("reckon.saga.name")
	attrStep     = attribute.Key("reckon.saga.step")
	attrState    = attribute.Key("reckon.saga.state")
	attrEffectID = attribute.Key("reckon.effect.id")
	attrTenant   = attribute.Key("reckon.tenant")
	attrOutcome  = attribute.Key("reckon.outcome")
)

// tracer returns the tracer of the client's spans: the effects client's provider's, a no-op one
// before the client is installed.
func (c *Client) tracer() trace.Tracer {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.spans == nil {
		return noop.NewTracerProvider().Tracer(TracerName)
	}
	return c.spans
}

// endSpan ends span with err, if any, as its error status.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startMove starts the span of one move of the saga a (a step or a compensation settled, an
// operator's decision).
func (a *advance) startMove(ctx context.Context, name string, step int) (context.Context, trace.Span) {
	ctx, span := a.c.tracer().Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attrSagaID.String(a.saga.ID.String()), attrSagaName.String(a.saga.Name),
			attrTenant.String(a.saga.TenantID), attrStep.Int(step))
	}
	return ctx, span
}

// endMove ends a move's span with the saga's state after it.
func (a *advance) endMove(span trace.Span, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrState.String(string(a.saga.State)))
	}
	endSpan(span, err)
}
