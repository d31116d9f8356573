package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler adds trace_id and span_id to every record logged with a context whose span is
// recording (the …Context methods of slog.Logger), so that a log line can be found from its trace
// and the other way round. With tracing off no span records and nothing is added.
type LogHandler struct{ slog.Handler }

// NewLogHandler wraps next; wrap a logger's handler with it once, where the logger is made.
func NewLogHandler(next slog.Handler) *LogHandler { return &LogHandler{Handler: next} }

// Handle adds trace_id and span_id from ctx's recording span, if any, and passes the record on.
func (h *LogHandler) Handle(ctx context.Context, record slog.Record) error {
	if ctx != nil {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			sc := span.SpanContext()
			record.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, record)
}

// WithAttrs keeps the trace ids of the handler's derived loggers.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{Handler: h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the trace ids of the handler's derived loggers.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{Handler: h.Handler.WithGroup(name)}
}
