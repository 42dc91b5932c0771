// Command sealer-echo serves the floors the sealer is measured against: the
// same API doing no work. Its gRPC server is a sealer.v1.Sealer that decodes
// each request (gRPC does) and answers a prebuilt response of the size the
// sealer would send; its HTTP server decodes the same JSON bodies as the
// sealer's REST gateway with encoding/json and answers prebuilt bodies of the
// sealer's sizes. What the sealer costs beyond these is its own.
//
//	sealer-echo -grpc-addr 127.0.0.1:7543 -http-addr 127.0.0.1:7580
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

func main() {
	grpcAddr := flag.String("grpc-addr", "127.0.0.1:7543", "gRPC echo of sealer.v1.Sealer")
	httpAddr := flag.String("http-addr", "127.0.0.1:7580", "HTTP JSON echo of the REST API")
	flag.Parse()
	// As the sealer does (cmd/sealer), so that only the work differs.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *grpcAddr, *httpAddr); err != nil {
		fmt.Fprintln(os.Stderr, "sealer-echo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, grpcAddr, httpAddr string) error {
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return err
	}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	e := &echo{}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(2<<20), grpc.NumStreamWorkers(256))
	sealerv1.RegisterSealerServer(gs, e)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/seal", e.restSeal)
	mux.HandleFunc("POST /v1/open", e.restOpen)
	hs := &http.Server{Handler: http.MaxBytesHandler(mux, 2<<20), ReadHeaderTimeout: 10 * time.Second}
	slog.Info("listening", "grpc", gl.Addr().String(), "http", hl.Addr().String())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return gs.Serve(gl) })
	g.Go(func() error {
		if err := hs.Serve(hl); err != http.ErrServerClosed {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		hs.Close()
		gs.Stop()
		return nil
	})
	return g.Wait()
}

// echo answers with prebuilt responses, one per payload size, each as
// large as the sealer's answer for that size.
type echo struct {
	sealerv1.UnimplementedSealerServer
	sizes sync.Map // payload size -> *prebuilt
}

type prebuilt struct {
	seal     *sealerv1.SealResponse
	open     *sealerv1.OpenResponse
	sealJSON []byte
	openJSON []byte
}

// forSize returns the answers for a payload of n bytes: a real state sealed
// once with a throwaway key, so its length is the sealer's.
func (e *echo) forSize(n int) *prebuilt {
	if p, ok := e.sizes.Load(n); ok {
		return p.(*prebuilt)
	}
	k, _ := keys.NewKey(1, bytes.Repeat([]byte{7}, keys.Size), time.Time{})
	ring, _ := keys.NewRing([]keys.Key{k}, 1)
	// Times in whole milliseconds, as the sealer's, never on a whole second
	// (whose encodings are shorter).
	now := time.Now().Truncate(time.Second).Add(321 * time.Millisecond)
	state, err := sealer.Seal(ring, "default", sealer.Claims{Principal: "alice", IssuedAt: now, ExpiresAt: now.Add(5 * time.Minute)}, make([]byte, n))
	if err != nil {
		panic(err) // a constant input: programmer error
	}
	exp := timestamppb.New(now.Add(5 * time.Minute))
	p := &prebuilt{
		seal: &sealerv1.SealResponse{RequestState: state, ExpiresAt: exp},
		open: &sealerv1.OpenResponse{Payload: make([]byte, n), IssuedAt: timestamppb.New(now), ExpiresAt: exp},
	}
	// The sealer's gateway writes its answers with protojson: so does the echo.
	m := protojson.MarshalOptions{EmitUnpopulated: true}
	p.sealJSON, _ = m.Marshal(p.seal)
	p.openJSON, _ = m.Marshal(p.open)
	actual, _ := e.sizes.LoadOrStore(n, p)
	return actual.(*prebuilt)
}

// payloadSizeOf returns the payload size of a state from its length alone:
// the sealer's overhead is fixed (FORMAT.md).
func (e *echo) payloadSizeOf(state string) int {
	overhead := base64.RawURLEncoding.DecodedLen(len(e.forSize(0).seal.RequestState))
	return min(sealer.MaxPayload, max(0, base64.RawURLEncoding.DecodedLen(len(state))-overhead))
}

// Seal implements sealerv1.SealerServer.
func (e *echo) Seal(_ context.Context, req *sealerv1.SealRequest) (*sealerv1.SealResponse, error) {
	return e.forSize(len(req.GetPayload())).seal, nil
}

// Open implements sealerv1.SealerServer.
func (e *echo) Open(_ context.Context, req *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	return e.forSize(e.payloadSizeOf(req.GetRequestState())).open, nil
}

// The REST bodies as the sealer's gateway reads them, for encoding/json.
type (
	binding struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
		Digest []byte         `json:"digest"`
	}
	sealBody struct {
		Principal string  `json:"principal"`
		Request   binding `json:"request"`
		Payload   []byte  `json:"payload"`
		TTL       string  `json:"ttl"`
		OneTime   bool    `json:"oneTime"`
	}
	openBody struct {
		RequestState string  `json:"requestState"`
		Principal    string  `json:"principal"`
		Request      binding `json:"request"`
	}
)

func (e *echo) restSeal(w http.ResponseWriter, r *http.Request) {
	var b sealBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, e.forSize(len(b.Payload)).sealJSON)
}

func (e *echo) restOpen(w http.ResponseWriter, r *http.Request) {
	var b openBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, e.forSize(e.payloadSizeOf(b.RequestState)).openJSON)
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}
