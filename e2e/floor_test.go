package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/sealer"
)

// startEcho runs bench/sealer-echo on free loopback ports and returns its
// gRPC and HTTP addresses.
func startEcho(t *testing.T) (grpcAddr, httpAddr string) {
	t.Helper()
	cmd := exec.Command(echoBinary, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0")
	m := startUntil(t, cmd, regexp.MustCompile(`listening grpc=(\S+) http=(\S+)`))
	return m[1], m[2]
}

// TestEchoFloor_AnswersAsLargeAsTheSealer: the floors of BENCHMARKS.md are
// fair only if the echo sends what the sealer sends. For payloads of
// several sizes, its gRPC answers and REST bodies are as large as the
// sealer's, byte for byte in length.
func TestEchoFloor_AnswersAsLargeAsTheSealer(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir())
	echoGRPC, echoHTTP := startEcho(t)
	sealers := map[string]sealerv1.SealerClient{
		"sealer": sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)),
		"echo":   sealerv1.NewSealerClient(dialGRPC(t, echoGRPC)),
	}
	bases := map[string]string{"sealer": "http://" + p.HTTP, "echo": "http://" + echoHTTP}
	binding := &sealerv1.Binding{Method: "tools/call", Params: mustStruct(t, weatherParams)}
	for _, size := range []int{0, 1, 1024, 4000, sealer.DefaultMaxPayload} { // the largest the sealer seals by default
		payload := make([]byte, size)
		grpcSizes, restSizes := map[string][2]int{}, map[string][2]int{}
		for name, c := range sealers {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			sealed, err := c.Seal(ctx, &sealerv1.SealRequest{Principal: "alice", Request: binding, Payload: payload})
			if err != nil {
				t.Fatalf("%s seal: %v", name, err)
			}
			opened, err := c.Open(ctx, &sealerv1.OpenRequest{RequestState: sealed.RequestState, Principal: "alice", Request: binding})
			cancel()
			if err != nil {
				t.Fatalf("%s open: %v", name, err)
			}
			// Timestamps are encoded in fewer bytes for some times than
			// others: sizes are compared with the times set alike.
			fixed := timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 321_000_000, time.UTC))
			sealed.ExpiresAt, opened.IssuedAt, opened.ExpiresAt = fixed, fixed, fixed
			grpcSizes[name] = [2]int{proto.Size(sealed), proto.Size(opened)}

			body := sealBody("alice", weatherParams, string(payload), "")
			sealResp, sealLen := restPost(t, bases[name]+"/v1/seal", body)
			openResp, openLen := restPost(t, bases[name]+"/v1/open", openBody(sealResp["requestState"].(string), "alice", weatherParams))
			restSizes[name] = [2]int{sealLen - timesLen(sealResp), openLen - timesLen(openResp)}
		}
		if grpcSizes["sealer"] != grpcSizes["echo"] {
			t.Errorf("payload %d: gRPC seal and open answers of %v bytes from the sealer, %v from the echo", size, grpcSizes["sealer"], grpcSizes["echo"])
		}
		if restSizes["sealer"] != restSizes["echo"] {
			t.Errorf("payload %d: REST seal and open bodies of %v bytes from the sealer, %v from the echo", size, restSizes["sealer"], restSizes["echo"])
		}
	}
}

func restPost(t *testing.T, url, body string) (map[string]any, int) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, data)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	// protojson adds a space here and there, differently in each binary,
	// so that no one depends on its exact output: lengths are compared
	// without it.
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		t.Fatal(err)
	}
	return m, compact.Len()
}

// timesLen is the length of the timestamps of a REST answer.
func timesLen(m map[string]any) int {
	n := 0
	for _, k := range []string{"issuedAt", "expiresAt"} {
		if v, ok := m[k].(string); ok {
			n += len(v)
		}
	}
	return n
}
