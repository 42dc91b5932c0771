package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/mcp-sealer/sealer/internal/version"
	"github.com/mcp-sealer/sealer/keys"
)

// tracing is the sealer's OpenTelemetry tracing: off unless the standard
// OTEL_* variables ask for it (an OTLP endpoint, or OTEL_TRACES_EXPORTER=otlp),
// and then a span per gRPC and REST call (continuing the caller's W3C
// traceparent), with child spans for the ledger and key loads. Spans carry
// method names, outcome reasons and tenant names only: never a principal,
// state or payload.
type tracing struct {
	tracer     trace.Tracer
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error // flushes what is buffered
	on         bool
}

// tracingOff is tracing that records nothing and costs nothing.
func tracingOff() *tracing {
	p := noop.NewTracerProvider()
	return &tracing{tracer: p.Tracer(""), provider: p, propagator: propagation.TraceContext{},
		shutdown: func(context.Context) error { return nil }}
}

// tracingWanted reports whether the OTEL_* variables ask for traces, and
// refuses exporters the sealer does not ship.
func tracingWanted() (bool, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := os.Getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER %q: the sealer exports otlp or none", exp)
	}
}

// openTracing sets tracing up from the OTEL_* variables: the exporter
// (OTEL_EXPORTER_OTLP_* endpoint, protocol grpc or http/protobuf, headers,
// TLS), the sampler (OTEL_TRACES_SAMPLER), the batch processor (OTEL_BSP_*)
// and the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
func openTracing(ctx context.Context) (*tracing, error) {
	on, err := tracingWanted()
	if err != nil || !on {
		return tracingOff(), err
	}
	var exp sdktrace.SpanExporter
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %v", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "sealer"), attribute.String("service.version", version.Get().Version)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %v", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &tracing{tracer: p.Tracer("github.com/mcp-sealer/sealer/server"), provider: p,
		propagator: propagation.TraceContext{}, shutdown: p.Shutdown, on: true}, nil
}

// grpcOptions are the server options that trace gRPC calls of the sealer
// service (not health checks or reflection).
func (t *tracing) grpcOptions() []grpc.ServerOption {
	if !t.on {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.provider), otelgrpc.WithPropagators(t.propagator),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool { return strings.HasPrefix(info.FullMethodName, sealerMethods) }),
	))}
}

// httpHandler traces the REST calls h serves, continuing the caller's
// traceparent header.
func (t *tracing) httpHandler(h http.Handler) http.Handler {
	if !t.on {
		return h
	}
	return otelhttp.NewHandler(h, "sealer.rest",
		otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(restSpanName))
}

// restSpanName names a REST call's span by its route, never by a path the
// caller chose: the names are a fixed few.
func restSpanName(_ string, r *http.Request) string {
	switch r.URL.Path {
	case "/v1/seal", "/v1/open":
		return "POST " + r.URL.Path
	}
	return "POST /v1/{unknown}"
}

// keys traces every load of a key source.
func (t *tracing) keys(src keys.Source) keys.Source {
	if !t.on {
		return src
	}
	return tracedSource{src, t.tracer}
}

type tracedSource struct {
	keys.Source
	tracer trace.Tracer
}

func (s tracedSource) Load(ctx context.Context) (*keys.Ring, error) {
	ctx, span := s.tracer.Start(ctx, "sealer.keys.load")
	defer span.End()
	r, err := s.Source.Load(ctx)
	if err != nil {
		span.SetStatus(codes.Error, "key load failed") // the cause goes to the log, not to the trace
	}
	return r, err
}
