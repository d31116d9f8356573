package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/reckonhq/reckon/effects"
	"github.com/reckonhq/reckon/effects/httpconn"
	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/pgtest"
)

// traceUpstream is an HTTP connector's upstream on 127.0.0.1 (the httpconn wire protocol) that
// records the headers of every request by path and answers with the handler set for the path
// (default: 200 {"ok":true}).
type traceUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	headers  map[string][]http.Header
	handlers map[string]http.HandlerFunc
}

func newTraceUpstream(t *testing.T, handlers map[string]http.HandlerFunc) *traceUpstream {
	u := &traceUpstream{headers: map[string][]http.Header{}, handlers: handlers}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.headers[r.URL.Path] = append(u.headers[r.URL.Path], r.Header.Clone())
		handler := u.handlers[r.URL.Path]
		u.mu.Unlock()
		if handler == nil {
			handler = answerJSON(http.StatusOK, `{"ok":true}`)
		}
		handler(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// received returns the headers of the requests to path so far.
func (u *traceUpstream) received(path string) []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.headers[path]...)
}

// requireCalledIn requires that the upstream got exactly one request at path, whose traceparent
// names traceID and, as the parent, span (the connector call's).
func (u *traceUpstream) requireCalledIn(t *testing.T, path string, traceID trace.TraceID, span trace.SpanID) {
	t.Helper()
	requests := u.received(path)
	require.Len(t, requests, 1)
	gotTrace, gotSpan := testkit.Traceparent(t, requests[0].Get("traceparent"))
	require.Equal(t, traceID, gotTrace, "the upstream is told the effect's trace")
	require.Equal(t, span, gotSpan, "with the connector call as its parent")
}

func answerJSON(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// performThenDrop closes the connection without an answer: the outcome is unknown.
func performThenDrop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// connectUpstream registers "up.wire", an HTTP connector (not retry safe, with a status check and a
// compensation) calling u.
// setupTraced is setup with a tracer and an upstream serving handlers (newTraceUpstream)
// connected as up.wire.
func setupTraced(t *testing.T, handlers map[string]http.HandlerFunc) (*harness, *testkit.Tracer, *traceUpstream) {
	t.Helper()
	tracer := testkit.NewTracer(t)
	h := setup(t, func(c *effects.Config) { c.TracerProvider = tracer })
	u := newTraceUpstream(t, handlers)
	h.connectUpstream(u)
	return h, tracer, u
}

func (h *harness) connectUpstream(u *traceUpstream) {
	h.t.Helper()
	def := httpconn.Definition{
		Name: "up.wire", Tags: wireTags, DispatchURL: u.URL + "/dispatch", StatusURL: u.URL + "/status",
		CompensateURL: u.URL + "/compensate", Timeout: 2 * time.Second, BackoffInitial: 10 * time.Millisecond,
	}
	require.NoError(h.t, h.registry.Register(def.Connector(nil)))
}

// callerSpan starts a span of the caller's own, a root of a new trace.
func callerSpan(tracer *testkit.Tracer, name string) (context.Context, trace.Span) {
	return tracer.Tracer("test").Start(context.Background(), name)
}

// enqueueTraced enqueues spec in a span of the caller's, "caller", which ends after the enqueue.
func (h *harness) enqueueTraced(tracer *testkit.Tracer, spec effects.Spec, opts *effects.EnqueueOpts) *effects.Effect {
	h.t.Helper()
	ctx, caller := callerSpan(tracer, "caller")
	defer caller.End()
	effect, err := h.client.Enqueue(ctx, spec, opts)
	require.NoError(h.t, err)
	return effect
}

// storedTraceparent returns the traceparent stored on the effect's row ("" for NULL).
func (h *harness) storedTraceparent(id uuid.UUID) string {
	h.t.Helper()
	var traceparent *string
	require.NoError(h.t, h.pool.QueryRow(context.Background(),
		`SELECT trace_context->>'traceparent' FROM reckon_effects WHERE id = $1`, id).Scan(&traceparent))
	if traceparent == nil {
		return ""
	}
	return *traceparent
}

// requireChild checks that child's parent is parent, in parent's trace.
func requireChild(t *testing.T, parent, child tracetest.SpanStub) {
	t.Helper()
	require.Equal(t, parent.SpanContext.TraceID(), child.SpanContext.TraceID(), "%s is in the trace of %s", child.Name, parent.Name)
	require.Equal(t, parent.SpanContext.SpanID(), child.Parent.SpanID(), "%s is a child of %s", child.Name, parent.Name)
}

// linksTo reports whether s links to the span sc.
func linksTo(s tracetest.SpanStub, sc trace.SpanContext) bool {
	for _, l := range s.Links {
		if l.SpanContext.SpanID() == sc.SpanID() && l.SpanContext.TraceID() == sc.TraceID() {
			return true
		}
	}
	return false
}

// The caller's span is the parent of reckon.enqueue, whose context the row keeps; River's job span
// continues it, and in it the dispatch and the connector's call: one trace, each span the child
// of the one before. The upstream receives a traceparent naming the connector call's span.
func TestTraceFromEnqueueToUpstream(t *testing.T) {
	t.Parallel()
	h, tracer, u := setupTraced(t, nil)
	h.start()

	effect := h.enqueueTraced(tracer, effects.Spec{Connector: "up.wire", IdempotencyKey: "traced-1", Args: map[string]any{"amount": 1}}, nil)
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)

	callerStub := tracer.WaitSpan(t, "caller", nil)
	enqueue := tracer.WaitSpan(t, "reckon.enqueue", testkit.OfEffect(effect.ID))
	requireChild(t, callerStub, enqueue)
	require.Equal(t, trace.SpanKindProducer, enqueue.SpanKind)
	traceID, spanID := testkit.Traceparent(t, h.storedTraceparent(effect.ID))
	require.Equal(t, enqueue.SpanContext.TraceID(), traceID, "the row keeps the enqueue's trace")
	require.Equal(t, enqueue.SpanContext.SpanID(), spanID, "and its span")

	work := tracer.WaitSpan(t, "river.work reckon_dispatch", nil)
	requireChild(t, enqueue, work)
	require.True(t, work.Parent.IsRemote(), "continued from the job's metadata")
	require.Equal(t, "reckon_dispatch", testkit.SpanAttr(work, "river.job.kind"))
	require.Equal(t, "reckon", testkit.SpanAttr(work, "river.queue"))
	require.Equal(t, "1", testkit.SpanAttr(work, "river.attempt"))
	dispatch := tracer.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(effect.ID))
	requireChild(t, work, dispatch)
	require.Equal(t, "confirmed", testkit.SpanAttr(dispatch, "reckon.outcome"))
	require.Equal(t, "up.wire", testkit.SpanAttr(dispatch, "reckon.connector"))
	require.Equal(t, "default", testkit.SpanAttr(dispatch, "reckon.tenant"))
	require.Equal(t, "1", testkit.SpanAttr(dispatch, "reckon.attempt"))
	call := tracer.WaitSpan(t, "reckon.connector.dispatch", testkit.OfEffect(effect.ID))
	requireChild(t, dispatch, call)
	require.Equal(t, trace.SpanKindClient, call.SpanKind)

	u.requireCalledIn(t, "/dispatch", callerStub.SpanContext.TraceID(), call.SpanContext.SpanID())
}

// The trace lives on the row, not in the process: an effect enqueued by one client (never
// started, its own tracer) is dispatched by another, started later on the same database with a
// tracer of its own, in the enqueuing caller's trace.
func TestTraceContinuesAcrossClients(t *testing.T) {
	t.Parallel()
	tracerA, tracerB := testkit.NewTracer(t), testkit.NewTracer(t)
	h := setup(t, func(c *effects.Config) { c.TracerProvider = tracerA })
	u := newTraceUpstream(t, nil)
	h.connectUpstream(u)

	ctx, caller := callerSpan(tracerA, "caller")
	effect, err := h.client.Enqueue(ctx, effects.Spec{Connector: "up.wire", IdempotencyKey: "restart-1"}, nil)
	require.NoError(t, err)
	caller.End()
	enqueue := tracerA.WaitSpan(t, "reckon.enqueue", testkit.OfEffect(effect.ID))
	require.NoError(t, h.client.Stop(context.Background()))

	config := testkit.FastConfig(h.registry)
	config.TracerProvider = tracerB
	reactor := testkit.NewClient(t, h.pool, config)
	testkit.Start(t, reactor)
	require.Equal(t, effects.StateConfirmed, testkit.Wait(t, reactor, effect.ID, 30*time.Second).State)

	work := tracerB.WaitSpan(t, "river.work reckon_dispatch", nil)
	requireChild(t, enqueue, work)
	dispatch := tracerB.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(effect.ID))
	requireChild(t, work, dispatch)
	require.Equal(t, enqueue.SpanContext.TraceID(), dispatch.SpanContext.TraceID())
	traceID, _ := testkit.Traceparent(t, u.received("/dispatch")[0].Get("traceparent"))
	require.Equal(t, enqueue.SpanContext.TraceID(), traceID)
	require.Empty(t, tracerA.Find("reckon.dispatch", nil), "the enqueuing client dispatched nothing")
}

// An effect whose upstream performs the call and drops the connection is UNKNOWN: its
// reconciliation and the status check are in the enqueue's trace, and the status check request
// carries a traceparent of that trace.
func TestTraceOfReconcile(t *testing.T) {
	t.Parallel()
	h, tracer, u := setupTraced(t, map[string]http.HandlerFunc{
		"/dispatch": performThenDrop,
		"/status":   answerJSON(http.StatusOK, `{"status":"present","result":{"ok":true}}`),
	})
	h.start()

	effect := h.enqueueTraced(tracer, effects.Spec{Connector: "up.wire", IdempotencyKey: "unknown-1"}, nil)
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	require.Equal(t, []string{">PENDING", "PENDING>UNKNOWN", "UNKNOWN>CONFIRMED"}, h.path(effect.ID))

	traceID := tracer.WaitSpan(t, "caller", nil).SpanContext.TraceID()
	dispatch := tracer.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(effect.ID))
	require.Equal(t, traceID, dispatch.SpanContext.TraceID())
	require.Equal(t, "unknown", testkit.SpanAttr(dispatch, "reckon.outcome"))
	require.Equal(t, "Error", dispatch.Status.Code.String())
	// The reconcile job was inserted under the dispatch's span: its job span continues it.
	work := tracer.WaitSpan(t, "river.work reckon_reconcile", nil)
	requireChild(t, dispatch, work)
	reconcile := tracer.WaitSpan(t, "reckon.reconcile", testkit.OfEffect(effect.ID))
	requireChild(t, work, reconcile)
	require.Equal(t, "CONFIRMED", testkit.SpanAttr(reconcile, "reckon.outcome"))
	check := tracer.WaitSpan(t, "reckon.connector.status_check", testkit.OfEffect(effect.ID))
	requireChild(t, reconcile, check)
	require.Equal(t, "present", testkit.SpanAttr(check, "reckon.outcome"))

	u.requireCalledIn(t, "/status", traceID, check.SpanContext.SpanID())
}

// A reconciliation whose job was inserted outside the effect's trace (here: by the sweeper, which
// works without a span) is still in the effect's trace, linked to its job's span.
func TestTraceOfSweptEffect(t *testing.T) {
	t.Parallel()
	h, tracer, _ := setupTraced(t, map[string]http.HandlerFunc{
		"/status": answerJSON(http.StatusOK, `{"status":"present","result":{"ok":true}}`),
	})

	effect := h.enqueueTraced(tracer, effects.Spec{Connector: "up.wire", IdempotencyKey: "swept-1"},
		&effects.EnqueueOpts{ScheduledAt: time.Now()}) // its job at once, to lose
	// The job is lost: the sweeper makes the effect UNKNOWN and hands it to a reconcile job.
	_, err := h.pool.Exec(context.Background(), `DELETE FROM river_job WHERE kind = 'reckon_dispatch'`)
	require.NoError(t, err)
	_, err = h.pool.Exec(context.Background(), `UPDATE reckon_effects SET updated_at = now() - interval '1 hour' WHERE id = $1`, effect.ID)
	require.NoError(t, err)
	h.start()
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)

	traceID := tracer.WaitSpan(t, "caller", nil).SpanContext.TraceID()
	work := tracer.WaitSpan(t, "river.work reckon_reconcile", nil)
	require.NotEqual(t, traceID, work.SpanContext.TraceID(), "the sweeper's job starts a trace of its own")
	reconcile := tracer.WaitSpan(t, "reckon.reconcile", testkit.OfEffect(effect.ID))
	require.Equal(t, traceID, reconcile.SpanContext.TraceID(), "the reconciliation is in the effect's trace")
	require.True(t, linksTo(reconcile, work.SpanContext), "linked to its job's span")
	enqueue := tracer.WaitSpan(t, "reckon.enqueue", testkit.OfEffect(effect.ID))
	require.Equal(t, enqueue.SpanContext.SpanID(), reconcile.Parent.SpanID(), "a child of the stored enqueue span")
}

// A compensation asked for in another trace (an operator's) is made in the original effect's
// trace, linked to the operator's span; the compensation keeps that trace, and its dispatch and
// the upstream's compensate request continue it.
func TestTraceOfCompensation(t *testing.T) {
	t.Parallel()
	h, tracer, u := setupTraced(t, nil)
	h.start()

	original := h.enqueueTraced(tracer, effects.Spec{Connector: "up.wire", IdempotencyKey: "comp-1"}, nil)
	require.Equal(t, effects.StateConfirmed, h.wait(original.ID).State)
	traceID := tracer.WaitSpan(t, "caller", nil).SpanContext.TraceID()

	opCtx, operator := callerSpan(tracer, "operator")
	compensation, err := h.client.Compensate(opCtx, original.ID, "test", "undo it", nil)
	require.NoError(t, err)
	operator.End()
	require.Equal(t, effects.StateConfirmed, h.wait(compensation.ID).State)

	opStub := tracer.WaitSpan(t, "operator", nil)
	require.NotEqual(t, traceID, opStub.SpanContext.TraceID())
	compensate := tracer.WaitSpan(t, "reckon.compensate", testkit.OfEffect(original.ID))
	require.Equal(t, traceID, compensate.SpanContext.TraceID(), "in the original's trace")
	require.True(t, linksTo(compensate, opStub.SpanContext), "linked to the operator's span")
	require.Equal(t, compensation.ID.String(), testkit.SpanAttr(compensate, "reckon.compensation.id"))
	gotTrace, gotSpan := testkit.Traceparent(t, h.storedTraceparent(compensation.ID))
	require.Equal(t, traceID, gotTrace)
	require.Equal(t, compensate.SpanContext.SpanID(), gotSpan, "the compensation keeps the compensate span")

	dispatch := tracer.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(compensation.ID))
	require.Equal(t, traceID, dispatch.SpanContext.TraceID())
	require.Equal(t, original.ID.String(), testkit.SpanAttr(dispatch, "reckon.compensates.id"))
	call := tracer.WaitSpan(t, "reckon.connector.compensate", testkit.OfEffect(compensation.ID))
	requireChild(t, dispatch, call)
	u.requireCalledIn(t, "/compensate", traceID, call.SpanContext.SpanID())
}

// A callback — arriving in a trace of its own, the callback request's — is a span in the
// effect's trace, linked to the callback's.
func TestTraceOfCallback(t *testing.T) {
	t.Parallel()
	h, tracer, _ := setupTraced(t, map[string]http.HandlerFunc{"/dispatch": answerJSON(http.StatusAccepted, `{}`)})
	h.start()

	effect := h.enqueueTraced(tracer, effects.Spec{Connector: "up.wire", IdempotencyKey: "async-1"}, nil)
	var accepted *effects.Effect
	require.Eventually(t, func() bool {
		var err error
		accepted, err = h.client.Get(context.Background(), effect.ID)
		require.NoError(t, err)
		return accepted.CorrelationID != ""
	}, 10*time.Second, 10*time.Millisecond, "the acceptance is recorded")
	traceID := tracer.WaitSpan(t, "caller", nil).SpanContext.TraceID()
	dispatch := tracer.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(effect.ID))
	require.Equal(t, "accepted", testkit.SpanAttr(dispatch, "reckon.outcome"))
	require.Equal(t, "Unset", dispatch.Status.Code.String(), "an acceptance is no failure")

	cbCtx, request := callerSpan(tracer, "callback request")
	var settled *effects.Effect
	require.NoError(t, h.inTx(func(tx pgx.Tx) error {
		var err error
		settled, err = h.client.CallbackTx(cbCtx, tx, accepted.CorrelationID, json.RawMessage(`{"done":true}`), "", nil)
		return err
	}))
	request.End()
	require.Equal(t, effects.StateConfirmed, settled.State)

	requestStub := tracer.WaitSpan(t, "callback request", nil)
	callback := tracer.WaitSpan(t, "reckon.callback", testkit.OfEffect(effect.ID))
	require.Equal(t, traceID, callback.SpanContext.TraceID(), "in the effect's trace")
	require.True(t, linksTo(callback, requestStub.SpanContext), "linked to the callback request's span")
	require.Equal(t, "CONFIRMED", testkit.SpanAttr(callback, "reckon.outcome"))
}

// countingMiddleware counts the jobs inserted and worked through River, by kind.
type countingMiddleware struct {
	river.MiddlewareDefaults
	inserted, worked sync.Map // kind → *atomic.Int64
	sawSpan          atomic.Bool
}

func (m *countingMiddleware) add(counts *sync.Map, kind string) {
	n, _ := counts.LoadOrStore(kind, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

func (m *countingMiddleware) count(counts *sync.Map, kind string) int64 {
	n, ok := counts.Load(kind)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func (m *countingMiddleware) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range params {
		m.add(&m.inserted, p.Kind)
	}
	return doInner(ctx)
}

func (m *countingMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	m.add(&m.worked, job.Kind)
	if trace.SpanFromContext(ctx).IsRecording() {
		m.sawSpan.Store(true) // Reckon's job span is already open: ours runs outside
	}
	return doInner(ctx)
}

// Config.RiverMiddleware is installed in the River client, inside Reckon's own: it sees every job
// inserted and worked, and the job's span. Validate refuses an entry that is nil or no middleware.
func TestRiverMiddleware(t *testing.T) {
	t.Parallel()
	tracer := testkit.NewTracer(t)
	counter := &countingMiddleware{}
	h := setup(t, func(c *effects.Config) {
		c.TracerProvider = tracer
		c.RiverMiddleware = []rivertype.Middleware{counter}
	})
	h.connectUpstream(newTraceUpstream(t, nil))
	h.start()

	effect, err := h.client.Enqueue(context.Background(), effects.Spec{Connector: "up.wire", IdempotencyKey: "mw-1"}, nil)
	require.NoError(t, err)
	require.Equal(t, effects.StateConfirmed, h.wait(effect.ID).State)
	require.Equal(t, int64(1), counter.count(&counter.inserted, "reckon_dispatch"))
	require.Eventually(t, func() bool { return counter.count(&counter.worked, "reckon_dispatch") == 1 }, 5*time.Second, 10*time.Millisecond)
	require.True(t, counter.sawSpan.Load(), "the user's middleware runs inside the job's span")

	for _, bad := range [][]rivertype.Middleware{{nil}, {counter, &notMiddleware{}}} {
		config := testkit.FastConfig(h.registry)
		config.RiverMiddleware = bad
		_, err := effects.NewClient(h.pool, config)
		require.ErrorContains(t, err, "Config.RiverMiddleware[")
	}
}

type notMiddleware struct{ river.MiddlewareDefaults }

// Tracing off — the default, a global TracerProvider with no SDK installed — stores nothing: the
// effect's trace_context is NULL, its job's metadata has no trace context, and the upstream gets no
// traceparent.
func TestTracingOff(t *testing.T) {
	t.Parallel()
	h := setup(t)
	u := newTraceUpstream(t, nil)
	h.connectUpstream(u)

	effect, err := h.client.Enqueue(context.Background(), effects.Spec{Connector: "up.wire", IdempotencyKey: "off-1"}, nil)
	require.NoError(t, err)
	many, err := h.client.EnqueueMany(context.Background(), []effects.Spec{
		{Connector: "up.wire", IdempotencyKey: "off-2"}, {Connector: "up.wire", IdempotencyKey: "off-3"},
	}, nil)
	require.NoError(t, err)
	require.Equal(t, 3, h.count(`SELECT count(*) FROM reckon_effects WHERE trace_context IS NULL`))
	require.Equal(t, 0, h.count(`SELECT count(*) FROM river_job WHERE metadata ? 'reckon:trace_context'`))
	h.start()
	for _, id := range []uuid.UUID{effect.ID, many[0].ID, many[1].ID} {
		require.Equal(t, effects.StateConfirmed, h.wait(id).State)
	}
	requests := u.received("/dispatch")
	require.Len(t, requests, 3)
	for _, header := range requests {
		require.Empty(t, header.Get("traceparent"))
	}
}

// EnqueueManyTx stores the enqueue span's context on every effect of the batch (a jsonb[] beside
// the other columns), and the batch's one job carries it too: its dispatches are children of the
// job's span.
func TestTraceOfBatch(t *testing.T) {
	t.Parallel()
	h, tracer, _ := setupTraced(t, nil)
	h.start()

	ctx, caller := callerSpan(tracer, "caller")
	batch, err := h.client.EnqueueMany(ctx, []effects.Spec{
		{Connector: "up.wire", IdempotencyKey: "batch-1"}, {Connector: "up.wire", IdempotencyKey: "batch-2"},
		{Connector: "up.wire", IdempotencyKey: "batch-1"}, // the same effect twice
	}, nil)
	require.NoError(t, err)
	caller.End()
	enqueue := tracer.WaitSpan(t, "reckon.enqueue", nil)
	require.Equal(t, "3", testkit.SpanAttr(enqueue, "reckon.effect.count"))
	require.Equal(t, 1, h.count(`SELECT count(*) FROM river_job WHERE kind = 'reckon_dispatch'`), "one job for the batch")
	for _, e := range batch[:2] {
		_, spanID := testkit.Traceparent(t, h.storedTraceparent(e.ID))
		require.Equal(t, enqueue.SpanContext.SpanID(), spanID)
		require.Equal(t, effects.StateConfirmed, h.wait(e.ID).State)
	}
	work := tracer.WaitSpan(t, "river.work reckon_dispatch", nil)
	requireChild(t, enqueue, work)
	for _, e := range batch[:2] {
		requireChild(t, work, tracer.WaitSpan(t, "reckon.dispatch", testkit.OfEffect(e.ID)))
	}
}

// BenchmarkEnqueueTxTracing measures one single-effect EnqueueTx per committed transaction, as
// BenchmarkEnqueueTx, with tracing off (the default: the global TracerProvider, no SDK) and on (an
// SDK sampling every span into memory, the caller's span around each enqueue): the cost of the
// spans and of the trace context written to the row and the job's metadata.
func BenchmarkEnqueueTxTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "tracing=off", true: "tracing=on"}[on], func(b *testing.B) {
			pool := pgtest.NewDB(b)
			registry := effects.NewRegistry()
			registry.MustRegister(fakebank.ConnectorOptions{BaseURL: "http://127.0.0.1:1", StatusCheck: true}.Connector())
			config := testkit.FastConfig(registry)
			var tracer trace.Tracer = noop.NewTracerProvider().Tracer("test")
			if on {
				provider := testkit.NewTracer(b)
				config.TracerProvider, tracer = provider, provider.Tracer("test")
			}
			client := testkit.NewClient(b, pool, config)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				ctx, span := tracer.Start(context.Background(), "caller")
				require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := client.EnqueueTx(ctx, tx, wireSpec(fmt.Sprintf("bench-%d", n), ""), nil)
					return err
				}))
				span.End()
			}
		})
	}
}
