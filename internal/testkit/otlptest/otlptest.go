// Package otlptest is an OTLP/HTTP trace receiver for tests: a real HTTP server on 127.0.0.1 that
// accepts what an OpenTelemetry SDK's OTLP exporter sends (POST /v1/traces, protobuf, gzipped or
// not) and keeps the spans, so that a test can point a process at it with
// OTEL_EXPORTER_OTLP_ENDPOINT and assert on the trace it produced.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request's body (compressed and decompressed).
const maxBody = 64 << 20

// Span is one received span, its ids hex-encoded as in a traceparent header ("" when absent:
// a root span's ParentSpanID).
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string // "server", "client", "internal", "producer", "consumer"
	// Service is the service.name of the resource that sent it.
	Service string
	// Attributes holds each attribute's value as a string, int64, float64 or bool (other kinds
	// formatted as text).
	Attributes map[string]any
	Links      []Link
	// StatusCode is "unset", "ok" or "error"; StatusMessage its description.
	StatusCode, StatusMessage string
	Start, End                time.Time
}

// Link is a span's link to another span.
type Link struct{ TraceID, SpanID string }

// Attr returns the attribute key of the span, nil when it has none.
func (s Span) Attr(key string) any { return s.Attributes[key] }

// String describes the span in one line, for failure messages.
func (s Span) String() string {
	return fmt.Sprintf("%s %q [%s] trace=%s span=%s parent=%s links=%v", s.Service, s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentSpanID, s.Links)
}

// Receiver is a running OTLP/HTTP trace receiver.
type Receiver struct {
	server *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	changed  chan struct{} // closed and replaced whenever spans arrive
}

// NewReceiver starts a receiver on 127.0.0.1; it stops when the test ends.
func NewReceiver(tb testing.TB) *Receiver {
	tb.Helper()
	r := &Receiver{changed: make(chan struct{})}
	r.server = httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	tb.Cleanup(r.server.Close)
	return r
}

// URL is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends
// /v1/traces).
func (r *Receiver) URL() string { return r.server.URL }

// Env is the environment that points an OTLP exporter at the receiver over http/protobuf and
// exports every 50 ms.
func (r *Receiver) Env() []string {
	return []string{
		"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.URL(), "OTEL_BSP_SCHEDULE_DELAY=50",
	}
}

// Spans returns a copy of every span received so far, in the order they arrived.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Requests is how many export requests were accepted.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// WaitFor waits until done, asked with every span received so far each time spans arrive, is
// true, and returns those spans; it fails the test after timeout with what it has.
func (r *Receiver) WaitFor(tb testing.TB, timeout time.Duration, what string, done func([]Span) bool) []Span {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := slices.Clone(r.spans), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			lines := make([]string, len(spans))
			for i, s := range spans {
				lines[i] = s.String()
			}
			tb.Fatalf("otlptest: no %s after %v; received %d spans:\n%s", what, timeout, len(spans), strings.Join(lines, "\n"))
			return nil
		}
	}
}

// Named returns the spans called name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want Content-Type application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip":
		gz, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, "gzip: "+err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = io.LimitReader(gz, maxBody)
	default:
		http.Error(w, "unsupported Content-Encoding "+enc, http.StatusUnsupportedMediaType)
		return
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var export collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &export); err != nil {
		http.Error(w, "decode ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	spans := decode(&export)
	r.mu.Lock()
	r.requests++
	r.spans = append(r.spans, spans...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	answer, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(answer)
}

// decode flattens an export request into Spans.
func decode(export *collectorpb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range export.GetResourceSpans() {
		service, _ := attributes(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				span := Span{
					TraceID: hexID(s.GetTraceId()), SpanID: hexID(s.GetSpanId()), ParentSpanID: hexID(s.GetParentSpanId()),
					Name: s.GetName(), Kind: enumName(s.GetKind().String(), "SPAN_KIND_"), Service: service, Attributes: attributes(s.GetAttributes()),
					StatusCode: enumName(s.GetStatus().GetCode().String(), "STATUS_CODE_"), StatusMessage: s.GetStatus().GetMessage(),
					Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
				}
				for _, l := range s.GetLinks() {
					span.Links = append(span.Links, Link{TraceID: hexID(l.GetTraceId()), SpanID: hexID(l.GetSpanId())})
				}
				out = append(out, span)
			}
		}
	}
	return out
}

func hexID(id []byte) string {
	if len(id) == 0 {
		return ""
	}
	return hex.EncodeToString(id)
}

// enumName is the lower-case name of an OTLP enum value without its prefix: "server" for
// SPAN_KIND_SERVER, "ok" for STATUS_CODE_OK.
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

func attributes(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = v.GetIntValue()
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = v.GetDoubleValue()
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = v.GetBoolValue()
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}
