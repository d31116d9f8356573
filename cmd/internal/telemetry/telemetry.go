// Package telemetry turns OpenTelemetry tracing on in Reckon's binaries, configured only by the
// standard OTEL_* environment variables, and off (the global no-op provider, nothing exported,
// nothing allocated per span) unless they ask for it.
//
// Tracing is on when OTEL_TRACES_EXPORTER names an exporter other than "none", or when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (the exporter is then
// OTLP); OTEL_SDK_DISABLED=true turns it off whatever else is set. When it is on, Setup installs a
// tracer provider (a batch span processor over the exporter, the sampler of OTEL_TRACES_SAMPLER,
// the resource of OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES) and the W3C trace context and
// baggage propagators as the global ones, which the library (effects.Config.TracerProvider's
// default) and the server's request spans use.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/reckonhq/reckon/cmd/internal/health"
)

// ErrConfig marks an OTEL_* variable whose value Setup cannot use: the binaries exit with status 2,
// as for any other bad configuration value.
var ErrConfig = errors.New("tracing configuration")

// The environment variables Setup reads itself; the exporter and the SDK read the others
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE …, OTEL_BSP_*,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSampler        = "OTEL_TRACES_SAMPLER"
	envSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
)

// batchEnv are the batch span processor's variables: the SDK reads them, and ignores (with a
// message on its own logger) a value that is not an integer. Setup refuses it instead.
var batchEnv = []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"}

// Enabled reports whether the environment turns tracing on (see the package comment).
func Enabled() bool {
	if disabled, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(envSDKDisabled))); disabled {
		return false
	}
	if exporter := strings.TrimSpace(os.Getenv(envExporter)); exporter != "" {
		return exporter != "none"
	}
	return os.Getenv(envEndpoint) != "" || os.Getenv(envTracesEndpoint) != ""
}

// Setup turns tracing on if the environment asks for it (Enabled), with service as service.name
// unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another, and logs one line saying
// where spans go. It returns the function that flushes the spans not yet exported and stops the
// provider: call it last, on the way out, with a context bounding the flush. When tracing is off
// it changes nothing and shutdown does nothing.
//
// A variable whose value cannot be used (an unknown exporter, protocol or sampler, an endpoint
// that is not an http(s) URL, a sampler ratio outside 0 to 1, a batch setting that is not a
// non-negative integer) is an error wrapping ErrConfig and naming it.
func Setup(ctx context.Context, logger *slog.Logger, service string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled() {
		return noop, nil
	}
	exporterName, err := checkEnv()
	if err != nil {
		return noop, err
	}
	sampler, err := samplerFromEnv()
	if err != nil {
		return noop, err
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return noop, fmt.Errorf("tracing: exporter %s: %w", exporterName, err)
	}
	res, err := newResource(ctx, service)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return noop, err
	}
	options := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)}
	if sampler != nil {
		options = append(options, sdktrace.WithSampler(sampler))
	}
	provider := sdktrace.NewTracerProvider(options...)
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	// Export failures (a collector that is down) are the SDK's to retry or drop; they are logged
	// here rather than on the SDK's own logger, in the binary's format.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing error", slog.String("error", err.Error()))
	}))
	serviceName := service
	if v, ok := res.Set().Value("service.name"); ok {
		serviceName = v.AsString()
	}
	attrs := []any{slog.String("exporter", exporterName), slog.String("service", serviceName), slog.String("sampler", samplerName())}
	if exporterName == "otlp" {
		attrs = append(attrs, slog.String("protocol", otlpProtocol()), slog.String("endpoint", otlpEndpoint()))
	}
	logger.Info("tracing on", attrs...)
	return provider.Shutdown, nil
}

// checkEnv names every OTEL_* variable Setup or the exporter would not understand, and returns
// the exporter's name.
func checkEnv() (string, error) {
	var problems []error
	exporter := strings.TrimSpace(os.Getenv(envExporter))
	switch exporter {
	case "":
		exporter = "otlp"
	case "otlp", "console":
	default:
		problems = append(problems, fmt.Errorf("%s=%q: want otlp, console or none", envExporter, exporter))
	}
	for _, name := range []string{envProtocol, envTracesProtocol} {
		switch v := os.Getenv(name); v {
		case "", "grpc", "http/protobuf":
		default:
			problems = append(problems, fmt.Errorf("%s=%q: want http/protobuf or grpc", name, v))
		}
	}
	for _, name := range []string{envEndpoint, envTracesEndpoint} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("%s=%q: want an http:// or https:// URL", name, v))
		}
	}
	for _, name := range batchEnv {
		if v := os.Getenv(name); v != "" {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 {
				problems = append(problems, fmt.Errorf("%s=%q: want a non-negative integer", name, v))
			}
		}
	}
	if err := errors.Join(problems...); err != nil {
		return "", fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return exporter, nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name (as the SDK
// reads them), nil for the SDK's default (parentbased_always_on), or an error naming the variable
// where the SDK would fall back to the default silently.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv(envSampler)))
	arg := strings.TrimSpace(os.Getenv(envSamplerArg))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return 0, fmt.Errorf("%w: %s=%q: want a number from 0 to 1", ErrConfig, envSamplerArg, arg)
		}
		return v, nil
	}
	switch name {
	case "":
		return nil, nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	default:
		return nil, fmt.Errorf("%w: %s=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio",
			ErrConfig, envSampler, os.Getenv(envSampler))
	}
}

// samplerName is the sampler for the log line.
func samplerName() string {
	name := strings.ToLower(strings.TrimSpace(os.Getenv(envSampler)))
	if name == "" {
		return "parentbased_always_on"
	}
	if arg := strings.TrimSpace(os.Getenv(envSamplerArg)); arg != "" && strings.HasSuffix(name, "traceidratio") {
		return name + ":" + arg
	}
	return name
}

// otlpProtocol is the OTLP exporter's protocol, as autoexport picks it.
func otlpProtocol() string {
	for _, name := range []string{envTracesProtocol, envProtocol} {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	return "http/protobuf"
}

// otlpEndpoint is where the OTLP exporter sends spans, for the log line.
func otlpEndpoint() string {
	if v := os.Getenv(envTracesEndpoint); v != "" {
		return v
	}
	if v := os.Getenv(envEndpoint); v != "" {
		return v
	}
	if otlpProtocol() == "grpc" {
		return "localhost:4317 (the default)"
	}
	return "localhost:4318 (the default)"
}

// newResource describes the process: service.name (service, unless the environment names
// another), service.version (the module's version, or its VCS revision for a build from a
// checkout), the host, and OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME over them.
func newResource(ctx context.Context, service string) (*resource.Resource, error) {
	version, revision, _ := health.Version()
	if version == "(devel)" || version == "unknown" {
		version = revision
	}
	base, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	fromEnv, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES entry (no "=", a bad percent-encoding): refused
		// like any other bad value, not half applied.
		return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", ErrConfig, err)
	}
	res, err := resource.Merge(base, fromEnv) // the environment's attributes win
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}
