// Package httpobs observes every request the server answers (the API, the console, health and
// metrics): an X-Request-Id, accepted from the client when well-formed and generated otherwise,
// echoed in the response, kept in the request's context for its log lines and error bodies; and
// the request metrics reckon_http_requests_total{route,method,code} and
// reckon_http_request_duration_seconds{route,method}.
package httpobs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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

// Handler serves next with a request id and request metrics registered on reg. routes is the
// server's mux, asked which pattern matches each request (the route label, never the raw path);
// next is routes itself or a handler around it. It fails only if reg refuses the metrics.
func Handler(reg prometheus.Registerer, routes *http.ServeMux, next http.Handler) (http.Handler, error) {
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(Header)
		if !validID(id) {
			id = uuid.NewString()
		}
		r.Header.Set(Header, id)
		w.Header().Set(Header, id)
		_, pattern := routes.Handler(r)
		info := &requestInfo{id: id, route: routeLabel(pattern)}
		instrumented.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), contextKey{}, info)))
	}), nil
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
