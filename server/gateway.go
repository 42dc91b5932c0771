package server

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sealergw "github.com/mcp-sealer/sealer/gen/gateway/sealer/v1"
	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// Limits of a request, applied before any parsing and the same on both
// transports: the largest params (1 MiB) and payload (64 KiB, 88 KiB as
// base64) with room for the rest, in one gRPC message or one HTTP body;
// headers; and the calls a connection or the HTTP server serves at once,
// counted before authentication.
const (
	maxRequest      = 2 << 20
	maxHeader       = 64 << 10
	maxStreams      = 256  // concurrent gRPC streams per connection
	maxHTTPInFlight = 1024 // concurrent REST calls, all connections together
)

// httpHandler serves the REST gateway on /v1/, metrics, and the probes. The
// generated gateway runs in process over restService: each REST call is
// authenticated by gateHTTP before its body is read, then passes the same
// gate as a gRPC call, with no loopback hop.
func (s *service) httpHandler(ctx context.Context, probes func(*http.ServeMux)) (http.Handler, error) {
	marshaler := newRESTJSON()
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, marshaler),
		runtime.WithErrorHandler(gatewayError),
		runtime.WithIncomingHeaderMatcher(gatewayHeader),
	)
	if err := sealergw.RegisterSealerHandlerServer(ctx, gw, restService{s: s}); err != nil {
		return nil, err
	}
	writeErr := func(w http.ResponseWriter, r *http.Request, err error) {
		runtime.HTTPError(r.Context(), gw, marshaler, w, r, err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/", s.gateHTTP(s.trace.httpHandler(http.MaxBytesHandler(gw, maxRequest)), maxHTTPInFlight, writeErr))
	mux.Handle("GET /metrics", s.metrics.Handler())
	probes(mux)
	return mux, nil
}

// gatewayError gives errors that the gateway makes itself (bad JSON, unknown
// fields, a body too large) the ErrorInfo reason the service's own errors
// carry, then writes them as the gateway does.
func gatewayError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	if st.Code() == codes.InvalidArgument && !hasErrorInfo(st) {
		if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reasonInvalidArgument, Domain: errorDomain}); derr == nil {
			st = withInfo
		}
	}
	runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r, st.Err())
}

func hasErrorInfo(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			return true
		}
	}
	return false
}

// restService is the service as the in-process gateway calls it: every call
// through the gate, as the gRPC interceptor sends its calls.
type restService struct {
	sealerv1.UnimplementedSealerServer
	s *service
}

var (
	sealMethod   = sealerMethods + "Seal"
	openMethod   = sealerMethods + "Open"
	recordMethod = sealerMethods + "Record"
)

// Seal implements sealerv1.SealerServer.
func (r restService) Seal(ctx context.Context, req *sealerv1.SealRequest) (*sealerv1.SealResponse, error) {
	resp, err := r.s.gate(ctx, sealMethod, req, r.seal)
	if err != nil {
		return nil, err
	}
	return resp.(*sealerv1.SealResponse), nil
}

// Open implements sealerv1.SealerServer.
func (r restService) Open(ctx context.Context, req *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	resp, err := r.s.gate(ctx, openMethod, req, r.open)
	if err != nil {
		return nil, err
	}
	return resp.(*sealerv1.OpenResponse), nil
}

// Record implements sealerv1.SealerServer.
func (r restService) Record(ctx context.Context, req *sealerv1.RecordRequest) (*sealerv1.RecordResponse, error) {
	resp, err := r.s.gate(ctx, recordMethod, req, r.record)
	if err != nil {
		return nil, err
	}
	return resp.(*sealerv1.RecordResponse), nil
}

func (r restService) seal(ctx context.Context, req any) (any, error) {
	return r.s.Seal(ctx, req.(*sealerv1.SealRequest))
}

func (r restService) open(ctx context.Context, req any) (any, error) {
	return r.s.Open(ctx, req.(*sealerv1.OpenRequest))
}

func (r restService) record(ctx context.Context, req any) (any, error) {
	return r.s.Record(ctx, req.(*sealerv1.RecordRequest))
}

// gatewayHeader turns no HTTP header into gRPC metadata: the service reads
// none (the tenant comes from gateHTTP).
func gatewayHeader(string) (string, bool) { return "", false }
