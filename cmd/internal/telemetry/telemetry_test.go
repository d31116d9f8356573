package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/reckonhq/reckon/cmd/internal/telemetry"
	"github.com/reckonhq/reckon/internal/testkit/otlptest"
)

// otelEnv are the variables these tests set; each test starts with all of them empty, whatever the
// environment the tests run in has.
var otelEnv = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_QUEUE_SIZE",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
}

// cleanEnv empties the OTEL_* variables, sets env (NAME=value pairs) and puts the global provider
// and propagator back when the test ends. Tests that use it cannot be parallel (t.Setenv).
func cleanEnv(t *testing.T, env ...string) {
	for _, name := range otelEnv {
		t.Setenv(name, "")
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	provider, propagator := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(provider)
		otel.SetTextMapPropagator(propagator)
	})
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env     []string
		enabled bool
	}{
		{nil, false},
		{[]string{"OTEL_TRACES_EXPORTER=none"}, false},
		{[]string{"OTEL_TRACES_EXPORTER=otlp"}, true},
		{[]string{"OTEL_TRACES_EXPORTER=console"}, true},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}, true},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces"}, true},
		{[]string{"OTEL_TRACES_EXPORTER=none", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}, false},
		{[]string{"OTEL_SDK_DISABLED=true", "OTEL_TRACES_EXPORTER=otlp"}, false},
		{[]string{"OTEL_SDK_DISABLED=false", "OTEL_TRACES_EXPORTER=otlp"}, true},
		{[]string{"OTEL_SERVICE_NAME=x", "OTEL_TRACES_SAMPLER=always_on"}, false},
	} {
		cleanEnv(t, tc.env...)
		require.Equal(t, tc.enabled, telemetry.Enabled(), "%v", tc.env)
	}
}

// TestOffByDefault: without OTEL_* variables Setup installs nothing, logs nothing and its shutdown
// does nothing; the global provider stays the no-op one.
func TestOffByDefault(t *testing.T) {
	cleanEnv(t)
	before := otel.GetTracerProvider()
	var logs bytes.Buffer
	shutdown, err := telemetry.Setup(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), "reckon-test")
	require.NoError(t, err)
	require.NoError(t, shutdown(context.Background()))
	require.Equal(t, before, otel.GetTracerProvider())
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	require.False(t, isSDK)
	require.Empty(t, logs.String())
	_, span := otel.Tracer("test").Start(context.Background(), "nothing")
	require.False(t, span.IsRecording(), "the global provider records nothing")
}

// TestSetupExportsToOTLP: with an OTLP endpoint, spans reach the receiver with the service name
// given (or the environment's), after shutdown at the latest; the propagator is W3C trace context.
func TestSetupExportsToOTLP(t *testing.T) {
	for _, tc := range []struct {
		name, service string
		env           []string
	}{
		{"default service name", "reckon-test", nil},
		{"OTEL_SERVICE_NAME wins", "billing", []string{"OTEL_SERVICE_NAME=billing"}},
		{"OTEL_RESOURCE_ATTRIBUTES, gzipped", "payments", []string{"OTEL_RESOURCE_ATTRIBUTES=service.name=payments,deployment.environment=test", "OTEL_EXPORTER_OTLP_COMPRESSION=gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			receiver := otlptest.NewReceiver(t)
			cleanEnv(t, append(receiver.Env(), tc.env...)...)
			var logs bytes.Buffer
			shutdown, err := telemetry.Setup(context.Background(), slog.New(slog.NewJSONHandler(&logs, nil)), "reckon-test")
			require.NoError(t, err)
			var line map[string]any
			require.NoError(t, json.Unmarshal(logs.Bytes(), &line), logs.String())
			require.Equal(t, "tracing on", line["msg"])
			require.Equal(t, "otlp", line["exporter"])
			require.Equal(t, receiver.URL(), line["endpoint"])
			require.Equal(t, tc.service, line["service"])

			ctx, parent := otel.Tracer("test").Start(context.Background(), "parent")
			_, child := otel.Tracer("test").Start(ctx, "child")
			carrier := propagation.MapCarrier{}
			otel.GetTextMapPropagator().Inject(ctx, carrier)
			require.Equal(t, "00-"+parent.SpanContext().TraceID().String()+"-"+parent.SpanContext().SpanID().String()+"-01", carrier["traceparent"])
			child.End()
			parent.End()
			spans := receiver.WaitFor(t, 10*time.Second, "both spans", func(s []otlptest.Span) bool { return len(s) == 2 })
			require.NoError(t, shutdown(context.Background()))
			byName := map[string]otlptest.Span{}
			for _, s := range spans {
				byName[s.Name] = s
				require.Equal(t, tc.service, s.Service)
			}
			require.Equal(t, byName["parent"].SpanID, byName["child"].ParentSpanID)
			require.Equal(t, byName["parent"].TraceID, byName["child"].TraceID)
			require.Empty(t, byName["parent"].ParentSpanID)
		})
	}
}

// TestShutdownFlushes: spans still queued (a schedule delay far longer than the test) are sent by
// shutdown.
func TestShutdownFlushes(t *testing.T) {
	receiver := otlptest.NewReceiver(t)
	cleanEnv(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL(), "OTEL_BSP_SCHEDULE_DELAY=600000")
	shutdown, err := telemetry.Setup(context.Background(), slog.New(slog.DiscardHandler), "reckon-test")
	require.NoError(t, err)
	for range 3 {
		_, span := otel.Tracer("test").Start(context.Background(), "queued")
		span.End()
	}
	require.Empty(t, receiver.Spans(), "nothing exported before the schedule delay")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, shutdown(ctx))
	require.Len(t, otlptest.Named(receiver.Spans(), "queued"), 3)
}

// TestSampler: OTEL_TRACES_SAMPLER is honoured (always_off records nothing; a parent-based
// sampler follows an unsampled parent).
func TestSampler(t *testing.T) {
	receiver := otlptest.NewReceiver(t)
	cleanEnv(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL(), "OTEL_TRACES_SAMPLER=always_off")
	shutdown, err := telemetry.Setup(context.Background(), slog.New(slog.DiscardHandler), "reckon-test")
	require.NoError(t, err)
	_, span := otel.Tracer("test").Start(context.Background(), "dropped")
	require.False(t, span.IsRecording())
	span.End()
	require.NoError(t, shutdown(context.Background()))
	require.Empty(t, receiver.Spans())
}

// TestBadValues: every variable Setup cannot use is an error wrapping ErrConfig and naming it, and
// nothing is installed.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"OTEL_TRACES_EXPORTER=jaeger"}, `OTEL_TRACES_EXPORTER="jaeger": want otlp, console or none`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp,console"}, `OTEL_TRACES_EXPORTER="otlp,console"`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=thrift"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="thrift"`},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4318"}, `OTEL_EXPORTER_OTLP_ENDPOINT="localhost:4318": want an http:// or https:// URL`},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"}, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://"`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_TRACES_SAMPLER=sometimes"}, `OTEL_TRACES_SAMPLER="sometimes"`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=1.5"}, `OTEL_TRACES_SAMPLER_ARG="1.5": want a number from 0 to 1`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=half"}, `OTEL_TRACES_SAMPLER_ARG="half"`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_BSP_SCHEDULE_DELAY=5s"}, `OTEL_BSP_SCHEDULE_DELAY="5s": want a non-negative integer`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_BSP_MAX_QUEUE_SIZE=-1"}, `OTEL_BSP_MAX_QUEUE_SIZE="-1"`},
		{[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_RESOURCE_ATTRIBUTES=service.name"}, `OTEL_RESOURCE_ATTRIBUTES`},
	} {
		cleanEnv(t, tc.env...)
		otel.SetTracerProvider(noop.NewTracerProvider())
		_, err := telemetry.Setup(context.Background(), slog.New(slog.DiscardHandler), "reckon-test")
		require.Error(t, err, "%v", tc.env)
		require.True(t, errors.Is(err, telemetry.ErrConfig), "%v: %v", tc.env, err)
		require.ErrorContains(t, err, tc.want)
		_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
		require.False(t, isSDK, "%v: nothing installed", tc.env)
	}
}

// TestLogHandler: a record logged with a recording span's context carries its trace and span ids;
// one without, none.
func TestLogHandler(t *testing.T) {
	t.Parallel()
	provider := sdktrace.NewTracerProvider()
	defer provider.Shutdown(context.Background()) //nolint:errcheck
	var logs bytes.Buffer
	logger := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&logs, nil))).With(slog.String("component", "x"))
	ctx, span := provider.Tracer("test").Start(context.Background(), "op")
	logger.InfoContext(ctx, "inside")
	span.End()
	logger.InfoContext(context.Background(), "outside")
	// Tracing off: the no-op provider's span does not record, and adds nothing.
	noopCtx, _ := noop.NewTracerProvider().Tracer("test").Start(ctx, "noop")
	logger.InfoContext(noopCtx, "noop")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 3)
	var inside, outside, off map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &inside))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &outside))
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &off))
	require.NotContains(t, off, "trace_id")
	require.Equal(t, span.SpanContext().TraceID().String(), inside["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), inside["span_id"])
	require.Equal(t, "x", inside["component"])
	require.NotContains(t, outside, "trace_id")
}
