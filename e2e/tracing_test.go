package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
)

// otelcolBinary returns the OpenTelemetry Collector built by scripts/test.sh,
// or fails (CI) or skips the test.
func otelcolBinary(t *testing.T) string {
	t.Helper()
	return testenv.File(t, "SEALER_TEST_OTELCOL", "OpenTelemetry Collector")
}

// spanSink is where the collector exports what it received (OTLP/HTTP):
// the test reads the spans the collector saw, decoded.
type spanSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs []*commonpb.KeyValue // every attribute of every span, event and resource
}

func (s *spanSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		s.attrs = append(s.attrs, rs.GetResource().GetAttributes()...)
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.spans = append(s.spans, sp)
				s.attrs = append(s.attrs, sp.Attributes...)
				for _, e := range sp.Events {
					s.attrs = append(s.attrs, e.Attributes...)
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Write(b)
}

// find returns the first span with name in trace, or nil.
func (s *spanSink) find(name string, trace []byte) *tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.spans {
		if sp.Name == name && (trace == nil || string(sp.TraceId) == string(trace)) {
			return sp
		}
	}
	return nil
}

// startCollector runs the collector with an OTLP gRPC receiver and an
// OTLP/HTTP exporter to sink, and returns the receiver's address.
func startCollector(t *testing.T, sink http.Handler) string {
	t.Helper()
	bin := otelcolBinary(t)
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	config := filepath.Join(t.TempDir(), "otelcol.yaml")
	writeFile(t, config, fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  otlphttp:
    endpoint: %s
    compression: none
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlphttp]
`, addr, srv.URL))
	cmd := exec.Command(bin, "--config", "file:"+config)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not listen on %s within 20s:\n%s", addr, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr
}

func randomID(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestTracing_SpansReachACollectorLinkedToTheCaller: with the OTEL_*
// variables pointing at a real OpenTelemetry Collector, a gRPC call and a
// REST call that carry a W3C traceparent produce server spans in the
// caller's trace, as children of the caller's span; a one-time Open's
// ledger consume is a child of its REST span; key loads are traced. No
// attribute anywhere holds the principal, the state or the payload.
func TestTracing_SpansReachACollectorLinkedToTheCaller(t *testing.T) {
	testenv.Lane(t, testenv.LaneShown)
	sink := &spanSink{}
	collector := startCollector(t, sink)
	p := startEnv(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + collector, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=sealer-e2e"}, t.TempDir())
	if !strings.Contains(p.logs.String(), `"tracing":true`) {
		t.Fatalf("the sealer did not turn tracing on:\n%s", p.logs)
	}
	const principal, payload = "principal-7f3a-not-for-traces", "payload-91c2-not-for-traces"
	parentOf := func(trace, span []byte) string {
		return "00-" + hex.EncodeToString(trace) + "-" + hex.EncodeToString(span) + "-01"
	}
	grpcTrace, grpcParent := randomID(16), randomID(8)
	restTrace, restParent := randomID(16), randomID(8)

	req := &sealerv1.SealRequest{}
	mustUnmarshal(t, sealBody(principal, weatherParams, payload, `,"oneTime":true`), req)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", parentOf(grpcTrace, grpcParent))
	sealed, err := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)).Seal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	rest := newREST(p)
	rest.header = http.Header{"Traceparent": {parentOf(restTrace, restParent)}}
	if _, reason := rest.call(t, "open", openBody(sealed.RequestState, principal, weatherParams)); reason != "OK" {
		t.Fatalf("open: %s", reason)
	}

	var seal, open, consume, load *tracepb.Span
	waitFor(t, "the spans at the collector", 15*time.Second, func() bool {
		seal = sink.find("sealer.v1.Sealer/Seal", grpcTrace)
		open = sink.find("POST /v1/open", restTrace)
		consume = sink.find("sealer.ledger.consume", restTrace)
		load = sink.find("sealer.keys.load", nil)
		return seal != nil && open != nil && consume != nil && load != nil
	})
	if string(seal.ParentSpanId) != string(grpcParent) || seal.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("gRPC Seal span: parent %x kind %v; want the caller's span %x, SERVER", seal.ParentSpanId, seal.Kind, grpcParent)
	}
	if string(open.ParentSpanId) != string(restParent) || open.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("REST open span: parent %x kind %v; want the caller's span %x, SERVER", open.ParentSpanId, open.Kind, restParent)
	}
	if string(consume.ParentSpanId) != string(open.SpanId) {
		t.Errorf("ledger consume span: parent %x; want the REST span %x", consume.ParentSpanId, open.SpanId)
	}
	t.Logf("gRPC: %s trace %x parent %x (the caller's); REST: %s trace %x parent %x (the caller's) > %s; %s",
		seal.Name, seal.TraceId, seal.ParentSpanId, open.Name, open.TraceId, open.ParentSpanId, consume.Name, load.Name)

	sink.mu.Lock()
	defer sink.mu.Unlock()
	secrets := []string{principal, payload, base64.StdEncoding.EncodeToString([]byte(payload)), sealed.RequestState}
	for _, kv := range sink.attrs {
		v := kv.GetValue().String()
		for _, s := range secrets {
			if strings.Contains(v, s) {
				t.Errorf("span attribute %s holds a principal, payload or state", kv.Key)
			}
		}
	}
	if len(sink.attrs) == 0 {
		t.Fatal("no attributes received; the scan would prove nothing")
	}
}
