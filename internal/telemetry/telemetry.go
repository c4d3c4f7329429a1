// Package telemetry sets up OpenTelemetry tracing from the standard
// environment variables (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, ...), through the
// contrib autoexport package. Without an exporter configured it leaves the
// global no-op tracer in place, so traced code costs nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Configured reports whether the environment asks for traces: an
// OTEL_TRACES_EXPORTER other than "none", or an OTLP endpoint, and not
// OTEL_SDK_DISABLED=true. (autoexport alone would default to OTLP on
// localhost, which a server that was told nothing must not do.)
func Configured(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs a global tracer provider that exports what the
// environment says (see Configured) and returns the function that flushes
// and stops it; without a configured exporter it installs nothing and the
// returned function does nothing. service and version name the resource
// (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES take precedence).
func Setup(ctx context.Context, service, version string) (shutdown func(context.Context) error, err error) {
	nop := func(context.Context) error { return nil }
	if !Configured(os.Getenv) {
		return nop, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nop, fmt.Errorf("opentelemetry: %w (check OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_PROTOCOL)", err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nop, nil
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nop, fmt.Errorf("opentelemetry resource: %w", err)
	}
	// The environment's service name and attributes win over ours.
	if env, eerr := resource.New(ctx, resource.WithFromEnv()); eerr == nil {
		if merged, merr := resource.Merge(res, env); merr == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}
