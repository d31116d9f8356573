package saga_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
	"github.com/reckonhq/reckon/saga"
)

// A saga is one trace, the trace of the span that started it: reckon.saga.start is its child; every
// effect of the saga — its steps, and the compensations of a failed one, by connector (CompensateTx)
// and by an effect of its own (UndoWith) — stores a context of that trace, and every move of the
// saga (reckon.saga.step, reckon.saga.compensation) and every dispatch is a span in it.
func TestSagaTrace(t *testing.T) {
	t.Parallel()
	tracer := testkit.NewTracer(t)
	h := &harness{t: t, pool: pgtest.NewDB(t), bank: fakebank.New(t), registry: effects.NewRegistry(), metrics: prometheus.NewRegistry()}
	registerConnectors(h.registry, h.bank.URL(), false, time.Second)
	config := effectsConfig(h.registry)
	config.TracerProvider = tracer
	h.effects, h.sagas = h.newClientsWith(config, saga.Config{}, 0)
	h.start(h.effects)

	ctx, caller := tracer.Tracer("test").Start(context.Background(), "caller")
	started, err := h.sagas.Start(ctx, "order", order{Account: "acct-1", Amount: 100, ShipAmount: 0}, nil)
	require.NoError(t, err)
	caller.End()
	done := h.wait(started.ID)
	require.Equal(t, saga.StateCompensated, done.State, "the shipment fails: the charge is refunded, the reservation released")

	traceID := tracer.WaitSpan(t, "caller", nil).SpanContext.TraceID()
	start := tracer.WaitSpan(t, "reckon.saga.start", nil)
	require.Equal(t, traceID, start.SpanContext.TraceID())
	require.Equal(t, started.ID.String(), testkit.SpanAttr(start, "reckon.saga.id"))
	first := tracer.WaitSpan(t, "reckon.enqueue", testkit.OfEffect(started.Steps[0].EffectID))
	require.Equal(t, start.SpanContext.SpanID(), first.Parent.SpanID(), "the first step is enqueued under the start")

	// Every effect of the saga keeps the caller's trace: 3 steps, the refund and the release.
	require.Equal(t, 5, h.count(`SELECT count(*) FROM reckon_effects WHERE trace_context->>'traceparent' LIKE '00-' || $1 || '-%'`, traceID.String()))
	require.Equal(t, 5, h.count(`SELECT count(*) FROM reckon_effects`))

	// The steps settled (reserve, charge confirmed; ship failed) and the two compensations settled.
	ofSaga := func(name string, n int) {
		t.Helper()
		require.Eventually(t, func() bool { return len(tracer.Find(name, nil)) == n }, 10*time.Second, 10*time.Millisecond,
			"%d %s spans\n%s", n, name, testkit.DescribeSpans(tracer.Spans()))
		for _, s := range tracer.Find(name, nil) {
			require.Equal(t, traceID, s.SpanContext.TraceID(), "%s in the saga's trace", name)
			require.Equal(t, started.ID.String(), testkit.SpanAttr(s, "reckon.saga.id"))
		}
	}
	ofSaga("reckon.saga.step", 3)
	ofSaga("reckon.saga.compensation", 2)
	require.Eventually(t, func() bool { return len(tracer.Find("reckon.dispatch", nil)) == 5 }, 10*time.Second, 10*time.Millisecond)
	for _, s := range tracer.Find("reckon.dispatch", nil) {
		require.Equal(t, traceID, s.SpanContext.TraceID(), "dispatch of %s", testkit.SpanAttr(s, "reckon.effect.id"))
	}
	// The move that failed the shipment is a child of its dispatch, and ends COMPENSATING.
	shipped := tracer.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(done.Steps[2].EffectID))
	failedMove := tracer.WaitSpan(t, "reckon.saga.step", func(s tracetest.SpanStub) bool { return testkit.SpanAttr(s, "reckon.saga.step") == "2" })
	require.Equal(t, shipped.SpanContext.SpanID(), failedMove.Parent.SpanID())
	require.Equal(t, "FAILED", testkit.SpanAttr(failedMove, "reckon.outcome"))
	require.Equal(t, "COMPENSATING", testkit.SpanAttr(failedMove, "reckon.saga.state"))
}
