package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/internal/testkit"
	"github.com/reckonhq/reckon/internal/testkit/fakebank"
	"github.com/reckonhq/reckon/internal/testkit/otlptest"
	"github.com/reckonhq/reckon/internal/testkit/proctest"
)

// tracedBank is the fake bank behind a server of its own that records the traceparent header of
// every call, by path and idempotency key.
type tracedBank struct {
	*fakebank.Bank
	mu           sync.Mutex
	traceparents map[string][]string // "path key" → traceparents, in order ("" when absent)
}

func newTracedBank(t *testing.T) *tracedBank {
	t.Helper()
	b := &tracedBank{traceparents: map[string][]string{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		key := r.URL.Path + " " + r.Header.Get("Idempotency-Key")
		b.traceparents[key] = append(b.traceparents[key], r.Header.Get("traceparent"))
		b.mu.Unlock()
		b.ServeHTTP(w, r)
	}))
	b.Bank = fakebank.NewHandler("http://" + srv.Listener.Addr().String())
	srv.Start()
	t.Cleanup(func() {
		b.Close()
		srv.Close()
	})
	return b
}

// seen returns the traceparents the calls to path with key carried.
func (b *tracedBank) seen(path, key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.traceparents[path+" "+key]...)
}

// tracedStack is a server and a reactor on one database, with the fake bank behind an HTTP
// connector bank.wire, and a tenant's token.
type tracedStack struct {
	api     apiClient
	token   string
	bank    *tracedBank
	srv     *proctest.Process
	reactor *proctest.Process
}

// startTracedStack starts the binaries with the extra environment tracing (the OTEL_* variables of
// the case) and defines the connector.
func startTracedStack(t *testing.T, tracing []string) (*tracedStack, func(sql string, args ...any) int) {
	t.Helper()
	server, pool, env := serverOnDB(t)
	s := &tracedStack{token: tenantToken(t, env, server, "acme", "-name", "ops"), bank: newTracedBank(t)}
	s.srv = proctest.Start(t, append(env, tracing...), server, "-addr", "127.0.0.1:0")
	s.api = apiClient{t: t, base: "http://" + s.srv.Addr(t)}
	s.reactor = startFastReactor(t, append(env, tracing...))
	base := s.bank.URL() + fakebank.ReckonPrefix
	s.api.putConnectorFor(s.reactor, systemToken(t, env, server), `{"name":"bank.wire","tags":["write","external","network"],
		"dispatch_url":"`+base+`/wires","status_url":"`+base+`/wires/status","timeout_ms":2000,
		"status_check_limit":3,"backoff_initial_ms":20,"backoff_max_ms":200}`)
	return s, func(sql string, args ...any) int { return testkit.Count(t, pool, sql, args...) }
}

// enqueueTraced posts an effect of bank.wire with key inside a client span of the test process's
// own tracer provider (an in-memory exporter) and returns the effect's id and the client span.
func (s *tracedStack) enqueueTraced(t *testing.T, key string) (string, sdktrace.ReadOnlySpan) {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer provider.Shutdown(context.Background()) //nolint:errcheck
	ctx, span := provider.Tracer("test").Start(context.Background(), "client "+key, trace.WithSpanKind(trace.SpanKindClient))
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	require.NotEmpty(t, carrier["traceparent"])
	r := s.api.do("POST", "/v1/effects", s.token, `{"connector":"bank.wire","idempotency_key":"`+key+`","args":{"account":"a-1","amount":10}}`,
		"traceparent", carrier["traceparent"])
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	span.End()
	spans := exporter.GetSpans().Snapshots()
	require.Len(t, spans, 1)
	return r.body["id"].(string), spans[0]
}

func (s *tracedStack) stateOf(t *testing.T, id string) string {
	t.Helper()
	r := s.api.do("GET", "/v1/effects/"+id, s.token, "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	return r.body["state"].(string)
}

// traceOf is the spans of one trace by span id, with what the test asserts on them.
type traceOf struct {
	t    *testing.T
	root string // the client span's id: the test process's, not received
	byID map[string]otlptest.Span
}

func newTraceOf(t *testing.T, spans []otlptest.Span, traceID, root string) traceOf {
	tr := traceOf{t: t, root: root, byID: map[string]otlptest.Span{}}
	for _, s := range spans {
		if s.TraceID == traceID {
			tr.byID[s.SpanID] = s
		}
	}
	return tr
}

// one returns the only span called name of the trace (for service), failing the test otherwise.
func (tr traceOf) one(name, service string) otlptest.Span {
	tr.t.Helper()
	var found []otlptest.Span
	for _, s := range tr.byID {
		if s.Name == name && s.Service == service {
			found = append(found, s)
		}
	}
	require.Len(tr.t, found, 1, "%s spans of %s in the trace: %s", name, service, tr)
	return found[0]
}

// descends reports whether span's chain of parents, followed through the received spans, reaches
// ancestor (a span id).
func (tr traceOf) descends(span otlptest.Span, ancestor string) bool {
	for hops := 0; span.ParentSpanID != "" && hops < 100; hops++ {
		if span.ParentSpanID == ancestor {
			return true
		}
		parent, ok := tr.byID[span.ParentSpanID]
		if !ok {
			return span.ParentSpanID == ancestor
		}
		span = parent
	}
	return false
}

func (tr traceOf) String() string {
	lines := make([]string, 0, len(tr.byID))
	for _, s := range tr.byID {
		lines = append(lines, s.String())
	}
	return "\n" + strings.Join(lines, "\n")
}

// spanIDOf is the span id of a traceparent header ("00-{trace}-{span}-{flags}"), "" when malformed.
func spanIDOf(traceparent string) (traceID, spanID string) {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		return "", ""
	}
	return parts[1], parts[2]
}

// all is a condition for WaitFor: the trace has a span of every name, from service ("name@service").
func all(traceID string, namesAtServices ...string) func([]otlptest.Span) bool {
	return func(spans []otlptest.Span) bool {
		seen := map[string]bool{}
		for _, s := range spans {
			if s.TraceID == traceID {
				seen[s.Name+"@"+s.Service] = true
			}
		}
		for _, want := range namesAtServices {
			if !seen[want] {
				return false
			}
		}
		return true
	}
}

// TestTracingEndToEnd: the server and the reactor binaries export to an OTLP receiver (OTEL_*
// variables only). An effect enqueued over HTTP inside the test's client span gives one trace:
// the server's span (reckon-server), child of the client span → reckon.enqueue → later, in the
// reactor process (reckon-reactor), reckon.dispatch → reckon.connector.dispatch, whose context the
// bank receives as traceparent. An effect whose call the bank performs and then drops (UNKNOWN) is
// reconciled in the same trace: reckon.reconcile, and a status check whose traceparent is of it.
func TestTracingEndToEnd(t *testing.T) {
	t.Parallel()
	receiver := otlptest.NewReceiver(t)
	s, count := startTracedStack(t, receiver.Env())
	require.True(t, s.srv.Logged("tracing on"), s.srv.Stderr())
	require.True(t, s.reactor.Logged("tracing on"), s.reactor.Stderr())

	t.Run("dispatch", func(t *testing.T) {
		id, client := s.enqueueTraced(t, "w-ok")
		require.Eventually(t, func() bool { return s.stateOf(t, id) == "CONFIRMED" }, 60*time.Second, 50*time.Millisecond)
		traceID, clientID := client.SpanContext().TraceID().String(), client.SpanContext().SpanID().String()
		spans := receiver.WaitFor(t, 30*time.Second, "the effect's spans", all(traceID,
			"POST /v1/effects@reckon-server", "reckon.enqueue@reckon-server", "reckon.dispatch@reckon-reactor", "reckon.connector.dispatch@reckon-reactor"))
		tr := newTraceOf(t, spans, traceID, clientID)

		server := tr.one("POST /v1/effects", "reckon-server")
		require.Equal(t, clientID, server.ParentSpanID, "the server continues the client's traceparent: %s", tr)
		require.Equal(t, "server", server.Kind)
		require.Equal(t, "/v1/effects", server.Attr("http.route"))
		require.Equal(t, int64(201), server.Attr("http.response.status_code"))
		require.NotEmpty(t, server.Attr("reckon.request_id"))

		enqueue := tr.one("reckon.enqueue", "reckon-server")
		require.Equal(t, server.SpanID, enqueue.ParentSpanID, "enqueue is the handler's: %s", tr)
		require.Equal(t, id, enqueue.Attr("reckon.effect.id"))

		dispatch := tr.one("reckon.dispatch", "reckon-reactor")
		require.True(t, tr.descends(dispatch, enqueue.SpanID), "dispatch continues the enqueue's trace from the effect's row: %s", tr)
		call := tr.one("reckon.connector.dispatch", "reckon-reactor")
		require.True(t, tr.descends(call, dispatch.SpanID), "the call is dispatch's: %s", tr)
		require.Equal(t, "client", call.Kind)
		require.True(t, tr.descends(call, clientID), "one chain from the client span to the call: %s", tr)

		seen := s.bank.seen("/reckon/wires", "w-ok")
		require.Len(t, seen, 1)
		upstreamTrace, upstreamParent := spanIDOf(seen[0])
		require.Equal(t, traceID, upstreamTrace, "the bank got a traceparent of the client's trace: %q", seen[0])
		require.Equal(t, call.SpanID, upstreamParent, "its parent is the connector call's span")
		require.Equal(t, 1, count(`SELECT count(*) FROM reckon_effects WHERE id = $1 AND trace_context->>'traceparent' LIKE $2`, id, "00-"+traceID+"-%"))
	})

	t.Run("reconcile", func(t *testing.T) {
		s.bank.Script("w-fog", fakebank.PerformThenDrop)
		id, client := s.enqueueTraced(t, "w-fog")
		require.Eventually(t, func() bool { return s.stateOf(t, id) == "CONFIRMED" }, 60*time.Second, 50*time.Millisecond,
			"the status check finds the wire the dropped call made")
		traceID, clientID := client.SpanContext().TraceID().String(), client.SpanContext().SpanID().String()
		spans := receiver.WaitFor(t, 30*time.Second, "the reconciliation's spans", all(traceID,
			"reckon.enqueue@reckon-server", "reckon.connector.dispatch@reckon-reactor", "reckon.reconcile@reckon-reactor", "reckon.connector.status_check@reckon-reactor"))
		tr := newTraceOf(t, spans, traceID, clientID)

		enqueue := tr.one("reckon.enqueue", "reckon-server")
		call := tr.one("reckon.connector.dispatch", "reckon-reactor")
		require.Equal(t, "error", call.StatusCode, "the dropped call is an error: %s", call)
		reconcile := tr.one("reckon.reconcile", "reckon-reactor")
		require.True(t, tr.descends(reconcile, enqueue.SpanID), "reconcile is in the enqueue's trace: %s", tr)
		require.True(t, tr.descends(reconcile, clientID), tr.String())
		check := tr.one("reckon.connector.status_check", "reckon-reactor")
		require.True(t, tr.descends(check, reconcile.SpanID), "the status check is reconcile's: %s", tr)

		seen := s.bank.seen("/reckon/wires/status", "w-fog")
		require.Len(t, seen, 1)
		checkTrace, checkParent := spanIDOf(seen[0])
		require.Equal(t, traceID, checkTrace, "the status check request carries the effect's trace: %q", seen[0])
		require.Equal(t, check.SpanID, checkParent)
	})

	// Stopped gracefully, each exits 0 after flushing its spans.
	stopBoth(t, s.srv, s.reactor)
}

// TestTracingOffByDefault: without OTEL_* variables, or with tracing turned off by them
// (OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none) beside an endpoint, nothing is exported, an
// incoming traceparent is not continued: the bank's calls carry none and the effect's row keeps
// no trace context.
func TestTracingOffByDefault(t *testing.T) {
	t.Parallel()
	for name, off := range map[string]func(receiver *otlptest.Receiver) []string{
		"no OTEL variables": func(*otlptest.Receiver) []string { return nil },
		"OTEL_SDK_DISABLED": func(r *otlptest.Receiver) []string { return append(r.Env(), "OTEL_SDK_DISABLED=true") },
		"exporter none wins": func(r *otlptest.Receiver) []string {
			return []string{"OTEL_TRACES_EXPORTER=none", "OTEL_EXPORTER_OTLP_ENDPOINT=" + r.URL(), "OTEL_BSP_SCHEDULE_DELAY=50"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			receiver := otlptest.NewReceiver(t)
			s, count := startTracedStack(t, off(receiver))
			id, _ := s.enqueueTraced(t, "w-off")
			require.Eventually(t, func() bool { return s.stateOf(t, id) == "CONFIRMED" }, 60*time.Second, 50*time.Millisecond)
			require.Equal(t, []string{""}, s.bank.seen("/reckon/wires", "w-off"), "no traceparent upstream")
			require.Equal(t, 1, count(`SELECT count(*) FROM reckon_effects WHERE id = $1 AND trace_context IS NULL`, id))
			stopBoth(t, s.srv, s.reactor) // a flush, if anything were queued
			require.Zero(t, receiver.Requests(), "nothing exported")
			require.False(t, s.srv.Logged("tracing on"))
			require.False(t, s.reactor.Logged("tracing on"))
		})
	}
}

// TestTracingBadEnv: an OTEL_* value tracing cannot use stops either binary at start with exit
// status 2 and a message naming the variable.
func TestTracingBadEnv(t *testing.T) {
	t.Parallel()
	server, reactor := proctest.Binary(t, "server"), proctest.Binary(t, "reactor")
	env := []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none?sslmode=disable"}
	for _, tc := range []struct{ env, want string }{
		{"OTEL_TRACES_EXPORTER=jaeger", `OTEL_TRACES_EXPORTER="jaeger"`},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318", `OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318"`},
	} {
		for _, bin := range []string{server, reactor} {
			res := proctest.Run(t, append(env, tc.env), bin, "-addr", "127.0.0.1:0")
			require.Equal(t, 2, res.ExitCode, "%s %s: %s", bin, tc.env, res.Stderr)
			require.Contains(t, res.Stderr, tc.want)
		}
	}
}
