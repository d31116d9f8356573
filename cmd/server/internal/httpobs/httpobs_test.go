package httpobs_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/reckonhq/reckon/cmd/server/internal/httpobs"
)

// setup serves a mux with one route of its own and a sub-router under /v1/ (like the API's),
// logging through the LogHandler into logs.
func setup(t *testing.T) (handler http.Handler, reg *prometheus.Registry, logs *bytes.Buffer) {
	t.Helper()
	logs = &bytes.Buffer{}
	logger := slog.New(httpobs.NewLogHandler(slog.NewJSONHandler(logs, nil)))
	inner := http.NewServeMux()
	inner.HandleFunc("GET /v1/effects/{id}", func(w http.ResponseWriter, r *http.Request) {
		logger.ErrorContext(r.Context(), "failed", slog.String("id", r.PathValue("id")))
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(httpobs.RequestID(r.Context())))
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := inner.Handler(r)
		httpobs.SetRoute(r.Context(), pattern)
		inner.ServeHTTP(w, r)
	}))
	reg = prometheus.NewRegistry()
	handler, err := httpobs.Handler(reg, mux, mux, nil)
	require.NoError(t, err)
	return handler, reg, logs
}

func serve(handler http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec
}

func TestMetricsByRoutePattern(t *testing.T) {
	t.Parallel()
	handler, reg, _ := setup(t)
	serve(handler, "GET", "/v1/effects/a")
	serve(handler, "GET", "/v1/effects/b")
	serve(handler, "GET", "/healthz")
	require.Equal(t, http.StatusNotFound, serve(handler, "GET", "/nowhere/x").Code)
	require.Equal(t, http.StatusNotFound, serve(handler, "GET", "/v1/nowhere").Code)

	expected := `
# HELP reckon_http_requests_total HTTP requests answered, by route pattern, method and status code.
# TYPE reckon_http_requests_total counter
reckon_http_requests_total{code="200",method="get",route="/healthz"} 1
reckon_http_requests_total{code="404",method="get",route="unmatched"} 2
reckon_http_requests_total{code="500",method="get",route="/v1/effects/{id}"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expected), "reckon_http_requests_total"))
	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, family := range families {
		if family.GetName() != "reckon_http_request_duration_seconds" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, label := range m.GetLabel() {
				if label.GetName() == "route" {
					counts[label.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	require.Equal(t, map[string]uint64{"/v1/effects/{id}": 2, "/healthz": 1, "unmatched": 2}, counts)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	handler, _, logs := setup(t)

	rec := serve(handler, "GET", "/v1/effects/a", "X-Request-Id", "client-id 42/a:b")
	require.Equal(t, "client-id 42/a:b", rec.Header().Get("X-Request-Id"), "a well-formed id is echoed")
	require.Equal(t, "client-id 42/a:b", rec.Body.String(), "and is the context's")
	max := strings.Repeat("x", httpobs.MaxIDLength)
	require.Equal(t, max, serve(handler, "GET", "/healthz", "X-Request-Id", max).Header().Get("X-Request-Id"))

	for name, hostile := range map[string]string{
		"NUL": "a\x00b", "10k": strings.Repeat("x", 10000), "129 bytes": max + "x", "non-ASCII": "café",
		"invalid UTF-8": "a\xffb", "control": "a\tb", "empty": "",
	} {
		rec := serve(handler, "GET", "/healthz", "X-Request-Id", hostile)
		require.Equal(t, http.StatusOK, rec.Code, name)
		id := rec.Header().Get("X-Request-Id")
		require.NotEqual(t, hostile, id, name)
		_, err := uuid.Parse(id)
		require.NoError(t, err, "%s: replaced by a generated id, got %q", name, id)
	}

	logs.Reset()
	rec = serve(handler, "GET", "/v1/effects/b")
	id := rec.Header().Get("X-Request-Id")
	_, err := uuid.Parse(id)
	require.NoError(t, err, "generated when absent")
	require.NotEqual(t, id, serve(handler, "GET", "/healthz").Header().Get("X-Request-Id"), "one per request")
	require.Equal(t, id, rec.Body.String())
	var line map[string]any
	require.NoError(t, json.Unmarshal(logs.Bytes(), &line), logs.String())
	require.Equal(t, id, line["request_id"], "the request's log line carries its id")
	require.Equal(t, "b", line["id"])
}
