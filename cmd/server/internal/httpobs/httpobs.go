// Package httpobs observes every request the server answers (the API, the console, health and
// metrics): an X-Request-Id, accepted from the client when well-formed and generated otherwise,
// echoed in the response, kept in the request's context for its log lines and error bodies; the
// request metrics reckon_http_requests_total{route,method,code} and
// reckon_http_request_duration_seconds{route,method}; and an OpenTelemetry server span, continuing
// the client's traceparent, in whose context the handlers run.
package httpobs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/felixge/httpsnoop"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Header is the request id's header, read from the request and set on the response.
const Header = "X-Request-Id"

// MaxIDLength is the longest request id accepted from a client, in bytes.
const MaxIDLength = 128

// Unmatched is the route label of a request that no route pattern matched.
const Unmatched = "unmatched"

// Buckets are the request duration histogram's upper bounds in seconds: an API answers in
// milliseconds, a request that waits for the database or a busy server in seconds, and the
// server's write timeout (30 s by default) bounds the longest.
var Buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// requestInfo is what a request's context carries. route is written once the handler that knows
// the final route pattern has run (SetRoute), and read when the metrics are recorded.
type requestInfo struct {
	id    string
	route string
}

type contextKey struct{}

// RequestID returns the request id of ctx, or "" outside a request served through Handler.
func RequestID(ctx context.Context) string {
	if info, ok := ctx.Value(contextKey{}).(*requestInfo); ok {
		return info.id
	}
	return ""
}

// SetRoute names the route pattern that answers the request of ctx, for a handler that routes
// again below the server's mux (the API's /v1/ routes); "" is Unmatched. Outside a request served
// through Handler it does nothing.
func SetRoute(ctx context.Context, pattern string) {
	if info, ok := ctx.Value(contextKey{}).(*requestInfo); ok {
		info.route = routeLabel(pattern)
	}
}

// routeLabel is a mux pattern without its method ("GET /v1/effects/{id}" → "/v1/effects/{id}");
// the method is a label of its own. "" is Unmatched.
func routeLabel(pattern string) string {
	if pattern == "" {
		return Unmatched
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return strings.TrimLeft(path, " \t")
	}
	return pattern
}

// validID reports whether a client's request id may be kept: 1 to MaxIDLength bytes of printable
// ASCII (space to tilde). Anything else is replaced, never refused.
func validID(id string) bool {
	if id == "" || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// TracerName is the name of the server spans' tracer (their instrumentation scope).
const TracerName = "github.com/reckonhq/reckon/cmd/server/internal/httpobs"

// AttrRequestID is the server span's attribute holding the request id.
const AttrRequestID = attribute.Key("reckon.request_id")

// Opts configures Handler's tracing. Nil, or a zero field, takes the default.
type Opts struct {
	// TracerProvider makes each request's server span. Default: the global provider
	// (otel.GetTracerProvider), which records nothing until tracing is set up (cmd/internal/telemetry).
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context a client sends (traceparent). Default: the global
	// propagator (otel.GetTextMapPropagator), which reads nothing until tracing is set up.
	Propagator propagation.TextMapPropagator
	// Untraced are the routes (patterns without their method, as in the route label) whose
	// requests get no span: probes and scrapes, every few seconds, would each be a trace of its
	// own. Default DefaultUntraced; an empty non-nil slice traces every route.
	Untraced []string
}

// DefaultUntraced are the routes Handler does not trace by default: health checks and scrapes.
var DefaultUntraced = []string{"/healthz", "/readyz", "/metrics"}

// Handler serves next with a request id, request metrics registered on reg and a server span.
// routes is the server's mux, asked which pattern matches each request (the route label and the
// span's name, never the raw path); next is routes itself or a handler around it. It fails only if
// reg refuses the metrics.
//
// The span continues the trace of the request's traceparent header, if any, and is named
// "{METHOD} {route}" (the method alone when no route matched): its context is the handlers', so
// the spans they make (the effects' reckon.enqueue) are its children. It carries
// http.request.method, http.route, http.response.status_code, url.path and reckon.request_id, and
// status Error for a 5xx answer. When the provider records nothing (tracing off) no attribute is
// computed and the response writer is not wrapped.
func Handler(reg prometheus.Registerer, routes *http.ServeMux, next http.Handler, opts *Opts) (http.Handler, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "reckon", Subsystem: "http", Name: "requests_total",
		Help: "HTTP requests answered, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "reckon", Subsystem: "http", Name: "request_duration_seconds",
		Help: "Time to answer HTTP requests, by route pattern and method.", Buckets: Buckets,
	}, []string{"route", "method"})
	for _, c := range []prometheus.Collector{requests, duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpobs: metrics: %w", err)
		}
	}
	route := promhttp.WithLabelFromCtx("route", func(ctx context.Context) string {
		if info, ok := ctx.Value(contextKey{}).(*requestInfo); ok {
			return info.route
		}
		return Unmatched
	})
	instrumented := promhttp.InstrumentHandlerDuration(duration, promhttp.InstrumentHandlerCounter(requests, next, route), route)
	var o Opts
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.Propagator == nil {
		o.Propagator = otel.GetTextMapPropagator()
	}
	if o.Untraced == nil {
		o.Untraced = DefaultUntraced
	}
	untraced := make(map[string]bool, len(o.Untraced))
	for _, route := range o.Untraced {
		untraced[route] = true
	}
	tracer := o.TracerProvider.Tracer(TracerName)
	// Made once: an option, and the variadic slice of one, allocate on every call.
	startOpts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	names := &spanNames{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(Header)
		if !validID(id) {
			id = uuid.NewString()
		}
		r.Header.Set(Header, id)
		w.Header().Set(Header, id)
		_, pattern := routes.Handler(r)
		info := &requestInfo{id: id, route: routeLabel(pattern)}
		if untraced[info.route] {
			instrumented.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), contextKey{}, info)))
			return
		}
		ctx := o.Propagator.Extract(context.WithValue(r.Context(), contextKey{}, info), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, names.get(r.Method, info.route), startOpts...)
		if !span.IsRecording() {
			defer span.End()
			instrumented.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		traced(instrumented, w, r.WithContext(ctx), span, info, names)
	}), nil
}

// spanNames caches spanName's answers, so that a request does not build its span's name (an
// allocation, also when tracing is off). There are as many as routes times standard methods.
type spanNames struct{ m sync.Map }

type spanNameKey struct{ method, route string }

func (n *spanNames) get(method, route string) string {
	if !known(method) {
		method = "HTTP" // not a key per client's whim
	}
	key := spanNameKey{method, route}
	if name, ok := n.m.Load(key); ok {
		return name.(string)
	}
	name := spanName(method, route)
	n.m.Store(key, name)
	return name
}

// traced serves r with a recording server span: the status code is read from the response
// writer, and the name and route are set once the handler has named the final route (SetRoute).
func traced(next http.Handler, w http.ResponseWriter, r *http.Request, span trace.Span, info *requestInfo, names *spanNames) {
	status := 0
	w = httpsnoop.Wrap(w, httpsnoop.Hooks{
		WriteHeader: func(write httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
			return func(code int) {
				if status == 0 && code >= 200 { // an informational 1xx is not the answer
					status = code
				}
				write(code)
			}
		},
		Write: func(write httpsnoop.WriteFunc) httpsnoop.WriteFunc {
			return func(b []byte) (int, error) {
				if status == 0 {
					status = http.StatusOK
				}
				return write(b)
			}
		},
	})
	method := semconv.HTTPRequestMethodOther
	if known(r.Method) {
		method = semconv.HTTPRequestMethodKey.String(r.Method)
	}
	span.SetAttributes(method, semconv.URLPath(r.URL.Path), AttrRequestID.String(info.id))
	defer func() {
		// A handler that panics (net/http recovers it and drops the connection) ends its span too.
		recovered := recover()
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		if recovered != nil {
			status = http.StatusInternalServerError
		}
		span.SetName(names.get(r.Method, info.route))
		if info.route != Unmatched {
			span.SetAttributes(semconv.HTTPRoute(info.route))
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
		if recovered != nil {
			panic(recovered)
		}
	}()
	next.ServeHTTP(w, r)
}

// spanName is a server span's name: "{METHOD} {route}", the method alone when no route matched,
// and "HTTP" for a method outside the standard ones (it would be a name per client's whim).
func spanName(method, route string) string {
	if !known(method) {
		method = "HTTP"
	}
	if route == Unmatched {
		return method
	}
	return method + " " + route
}

// known reports whether method is one of HTTP's standard methods.
func known(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// LogHandler adds request_id to every record logged with a request's context (the
// …Context methods of slog.Logger) by the handler it wraps.
type LogHandler struct{ slog.Handler }

// NewLogHandler wraps next; wrap a logger's handler with it once, where the logger is made.
func NewLogHandler(next slog.Handler) *LogHandler { return &LogHandler{Handler: next} }

// Handle adds request_id from ctx, if any, and passes the record on.
func (h *LogHandler) Handle(ctx context.Context, record slog.Record) error {
	if id := RequestID(ctx); id != "" {
		record.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, record)
}

// WithAttrs keeps the request ids of the handler's derived loggers.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{Handler: h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the request ids of the handler's derived loggers.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{Handler: h.Handler.WithGroup(name)}
}
