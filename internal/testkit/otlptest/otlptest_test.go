package otlptest_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/reckonhq/reckon/internal/testkit/otlptest"
)

func post(t *testing.T, url, contentType, encoding string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestReceiver: a hand-made export request, plain and gzipped, is decoded into Spans; what is not
// an OTLP/HTTP protobuf export is refused and recorded nowhere.
func TestReceiver(t *testing.T) {
	t.Parallel()
	r := otlptest.NewReceiver(t)
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	export := &collectorpb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: str("svc")}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{0xab}, 16), SpanId: bytes.Repeat([]byte{0x01}, 8), ParentSpanId: bytes.Repeat([]byte{0x02}, 8),
			Name: "op", Kind: tracepb.Span_SPAN_KIND_SERVER,
			Attributes: []*commonpb.KeyValue{{Key: "k", Value: str("v")}, {Key: "n", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 7}}}},
			Links:      []*tracepb.Span_Link{{TraceId: bytes.Repeat([]byte{0xcd}, 16), SpanId: bytes.Repeat([]byte{0x03}, 8)}},
			Status:     &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
		}}}},
	}}}
	raw, err := proto.Marshal(export)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, post(t, r.URL()+"/v1/traces", "application/x-protobuf", "", raw))
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(raw)
	require.NoError(t, w.Close())
	require.Equal(t, http.StatusOK, post(t, r.URL()+"/v1/traces", "application/x-protobuf", "gzip", gz.Bytes()))

	require.Equal(t, http.StatusUnsupportedMediaType, post(t, r.URL()+"/v1/traces", "application/json", "", []byte(`{}`)))
	require.Equal(t, http.StatusBadRequest, post(t, r.URL()+"/v1/traces", "application/x-protobuf", "", []byte("\xff\xff\xff")))
	require.Equal(t, http.StatusBadRequest, post(t, r.URL()+"/v1/traces", "application/x-protobuf", "gzip", raw))
	require.Equal(t, http.StatusNotFound, post(t, r.URL()+"/v1/metrics", "application/x-protobuf", "", raw))

	spans := r.Spans()
	require.Equal(t, 2, r.Requests())
	require.Len(t, spans, 2)
	require.Equal(t, spans[0], spans[1])
	s := spans[0]
	require.Equal(t, "abababababababababababababababab", s.TraceID)
	require.Equal(t, "0101010101010101", s.SpanID)
	require.Equal(t, "0202020202020202", s.ParentSpanID)
	require.Equal(t, "op", s.Name)
	require.Equal(t, "server", s.Kind)
	require.Equal(t, "svc", s.Service)
	require.Equal(t, "v", s.Attr("k"))
	require.Equal(t, int64(7), s.Attr("n"))
	require.Equal(t, []otlptest.Link{{TraceID: "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd", SpanID: "0303030303030303"}}, s.Links)
	require.Equal(t, "error", s.StatusCode)
	require.Equal(t, "boom", s.StatusMessage)
	require.Len(t, otlptest.Named(spans, "op"), 2)
}
