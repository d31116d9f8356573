package httpobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/reckonhq/reckon/cmd/server/internal/httpobs"
)

// tracedSetup is setup's routes served with a recording tracer provider and the W3C propagator;
// /v1/effects/{id} answers 500 after making a child span "inner" from its request's context, and
// /panic panics. untraced is Opts.Untraced.
func tracedSetup(t *testing.T, untraced ...string) (http.Handler, *tracetest.SpanRecorder) {
	t.Helper()
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	inner := http.NewServeMux()
	inner.HandleFunc("GET /v1/effects/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, span := provider.Tracer("handler").Start(r.Context(), "inner")
		span.End()
		w.WriteHeader(http.StatusInternalServerError)
	})
	inner.HandleFunc("POST /v1/effects", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) { panic("handler bug") })
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := inner.Handler(r)
		httpobs.SetRoute(r.Context(), pattern)
		inner.ServeHTTP(w, r)
	}))
	handler, err := httpobs.Handler(prometheus.NewRegistry(), mux, mux, &httpobs.Opts{TracerProvider: provider, Propagator: propagation.TraceContext{}, Untraced: untraced})
	require.NoError(t, err)
	return handler, recorder
}

func attrs(span sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range span.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestServerSpan: a request with a traceparent gets a server span in that trace, child of the
// client's span, named by the final route pattern, with the request's attributes; the handler's
// context carries it; a 5xx is an Error.
func TestServerSpan(t *testing.T) {
	t.Parallel()
	handler, recorder := tracedSetup(t)
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	rec := serve(handler, "GET", "/v1/effects/a?x=1", "traceparent", "00-"+traceID+"-"+parentID+"-01", "X-Request-Id", "req-1")
	require.Equal(t, http.StatusInternalServerError, rec.Code)

	spans := recorder.Ended()
	require.Len(t, spans, 2)
	innerSpan, server := spans[0], spans[1]
	require.Equal(t, "inner", innerSpan.Name())
	require.Equal(t, "GET /v1/effects/{id}", server.Name(), "the API's inner pattern, set by SetRoute after the span began")
	require.Equal(t, trace.SpanKindServer, server.SpanKind())
	require.Equal(t, traceID, server.SpanContext().TraceID().String())
	require.Equal(t, parentID, server.Parent().SpanID().String())
	require.True(t, server.Parent().IsRemote())
	require.Equal(t, server.SpanContext().SpanID(), innerSpan.Parent().SpanID(), "the handler's context is the server span's")
	require.Equal(t, map[attribute.Key]attribute.Value{
		"http.request.method":       attribute.StringValue("GET"),
		"http.route":                attribute.StringValue("/v1/effects/{id}"),
		"http.response.status_code": attribute.IntValue(500),
		"url.path":                  attribute.StringValue("/v1/effects/a"),
		"reckon.request_id":         attribute.StringValue("req-1"),
	}, attrs(server))
	require.Equal(t, codes.Error, server.Status().Code)
}

func TestServerSpanWithoutTraceparent(t *testing.T) {
	t.Parallel()
	handler, recorder := tracedSetup(t, []string{}...) // every route traced, /healthz too
	serve(handler, "GET", "/healthz")
	serve(handler, "POST", "/v1/effects")
	serve(handler, "GET", "/nowhere")
	serve(handler, "FOO", "/healthz")
	serve(handler, "GET", "/healthz", "traceparent", "garbage")
	spans := recorder.Ended()
	require.Len(t, spans, 5)
	for _, span := range spans {
		require.False(t, span.Parent().IsValid(), "%s: a root span", span.Name())
		require.True(t, span.SpanContext().IsSampled())
	}
	require.Equal(t, "GET /healthz", spans[0].Name())
	require.Equal(t, int64(200), attrs(spans[0])["http.response.status_code"].AsInt64(), "an implicit 200")
	require.Equal(t, codes.Unset, spans[0].Status().Code)

	require.Equal(t, "POST /v1/effects", spans[1].Name())
	require.Equal(t, int64(201), attrs(spans[1])["http.response.status_code"].AsInt64())
	require.Equal(t, codes.Unset, spans[1].Status().Code)

	require.Equal(t, "GET", spans[2].Name(), "no route: the method alone")
	require.NotContains(t, attrs(spans[2]), attribute.Key("http.route"))
	require.Equal(t, int64(404), attrs(spans[2])["http.response.status_code"].AsInt64())
	require.Equal(t, codes.Unset, spans[2].Status().Code, "a 4xx is the client's, not the server's error")

	require.Equal(t, "HTTP", spans[3].Name(), "a method outside the standard ones")
	require.Equal(t, "_OTHER", attrs(spans[3])["http.request.method"].AsString())

	require.Equal(t, "GET /healthz", spans[4].Name(), "a malformed traceparent starts a new trace")
}

// TestProbesUntraced: by default health checks and scrapes make no span (each would be a trace
// of its own every few seconds) but are still counted and get a request id; other routes are
// traced.
func TestProbesUntraced(t *testing.T) {
	t.Parallel()
	handler, recorder := tracedSetup(t, httpobs.DefaultUntraced...)
	rec := serve(handler, "GET", "/healthz", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotEmpty(t, rec.Header().Get(httpobs.Header))
	require.Empty(t, recorder.Ended(), "no span for a probe")
	serve(handler, "POST", "/v1/effects")
	spans := recorder.Ended()
	require.Len(t, spans, 1)
	require.Equal(t, "POST /v1/effects", spans[0].Name())
}

// TestServerSpanPanic: a handler that panics ends its span as a 500 Error, and the panic goes on to
// net/http.
func TestServerSpanPanic(t *testing.T) {
	t.Parallel()
	handler, recorder := tracedSetup(t)
	require.PanicsWithValue(t, "handler bug", func() { serve(handler, "GET", "/panic") })
	spans := recorder.Ended()
	require.Len(t, spans, 1)
	require.Equal(t, "GET /panic", spans[0].Name())
	require.Equal(t, int64(500), attrs(spans[0])["http.response.status_code"].AsInt64())
	require.Equal(t, codes.Error, spans[0].Status().Code)
}

// TestNoSpanWhenOff: with the default (global, no-op) provider and propagator a traceparent is not
// continued: the handler's context has no valid span.
func TestNoSpanWhenOff(t *testing.T) {
	t.Parallel()
	var got trace.SpanContext
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x", func(w http.ResponseWriter, r *http.Request) { got = trace.SpanContextFromContext(r.Context()) })
	handler, err := httpobs.Handler(prometheus.NewRegistry(), mux, mux, nil)
	require.NoError(t, err)
	rec := serve(handler, "GET", "/x", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.Equal(t, http.StatusOK, rec.Code)
	require.False(t, got.IsValid())
}

// BenchmarkHandler measures what httpobs adds to a request, with tracing off (the global no-op
// provider, as in a server without OTEL_* variables) and on (a recording provider, spans dropped).
//
//	go test -run X -bench Handler -benchmem ./cmd/server/internal/httpobs
func BenchmarkHandler(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/effects/{id}", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) })
	for _, bc := range []struct {
		name string
		opts *httpobs.Opts
	}{
		{"off", nil},
		{"on", &httpobs.Opts{TracerProvider: sdktrace.NewTracerProvider(), Propagator: propagation.TraceContext{}}},
	} {
		handler, err := httpobs.Handler(prometheus.NewRegistry(), mux, mux, bc.opts)
		require.NoError(b, err)
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/v1/effects/abc", nil)
			req.Header.Set("X-Request-Id", "bench")
			b.ReportAllocs()
			for b.Loop() {
				handler.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
	b.Run("bare mux", func(b *testing.B) {
		req := httptest.NewRequest("GET", "/v1/effects/abc", nil)
		b.ReportAllocs()
		for b.Loop() {
			mux.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
}
