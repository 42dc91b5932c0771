package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-sealer/sealer/client"
	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// toolCall is the binding every op seals and opens: a tools/call with
// arguments, as an MCP server receives it.
var toolCall = client.Binding{Method: "tools/call", Params: map[string]any{"name": "get_weather", "arguments": map[string]any{"location": "New York"}}}

const toolCallParams = `{"name":"get_weather","arguments":{"location":"New York"}}`

// targets are the gRPC connections to a set of servers: several per server,
// so that 64 workers do not share one.
type targets struct {
	conns   [][]*grpc.ClientConn
	clients map[*grpc.ClientConn]*client.Client
}

func dial(addrs []string, perTarget int, creds credentials.TransportCredentials) (*targets, error) {
	ts := &targets{clients: map[*grpc.ClientConn]*client.Client{}}
	for _, a := range addrs {
		var cs []*grpc.ClientConn
		for range max(perTarget, 1) {
			c, err := grpc.NewClient(a, grpc.WithTransportCredentials(creds))
			if err != nil {
				ts.close()
				return nil, err
			}
			cs = append(cs, c)
			ts.clients[c] = client.New(c)
		}
		ts.conns = append(ts.conns, cs)
	}
	return ts, nil
}

// conn returns the connection worker i uses: targets in turn, then the
// connections of a target in turn.
func (ts *targets) conn(i int) *grpc.ClientConn {
	t := i % len(ts.conns)
	return ts.conns[t][(i/len(ts.conns))%len(ts.conns[t])]
}

func (ts *targets) client(i int) *client.Client { return ts.clients[ts.conn(i)] }

func (ts *targets) close() {
	for c := range ts.clients {
		c.Close()
	}
}

// paramsSealOpen seals and opens with the params sent as a Struct, for the
// sealer to digest, as callers in other languages do.
func paramsSealOpen(ts *targets, auth func(context.Context) context.Context, payload []byte) op {
	params := &structpb.Struct{}
	if err := params.UnmarshalJSON([]byte(toolCallParams)); err != nil {
		panic(err) // a constant
	}
	binding := &sealerv1.Binding{Method: "tools/call", Params: params}
	return func(ctx context.Context, i int) error {
		ctx = auth(ctx)
		sealed, err := sealerv1.NewSealerClient(ts.conn(i)).Seal(ctx, &sealerv1.SealRequest{Principal: "alice", Request: binding, Payload: payload})
		if err != nil {
			return err
		}
		_, err = sealerv1.NewSealerClient(ts.conn(i+1)).Open(ctx, &sealerv1.OpenRequest{RequestState: sealed.RequestState, Principal: "alice", Request: binding})
		return err
	}
}

// restSealOpen seals and opens over REST with JSON bodies holding params,
// as a caller with nothing but an HTTP client does.
func restSealOpen(addrs []string, token string, size int) op {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
	payload := base64.StdEncoding.EncodeToString(make([]byte, size))
	sealBody := []byte(fmt.Sprintf(`{"principal":"alice","request":{"method":"tools/call","params":%s},"payload":%q}`, toolCallParams, payload))
	post := func(ctx context.Context, addr, method string, body []byte, out any) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/"+method, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return restError(resp.StatusCode, data)
		}
		return json.Unmarshal(data, out)
	}
	return func(ctx context.Context, i int) error {
		var sealed struct{ RequestState string }
		if err := post(ctx, addrs[i%len(addrs)], "seal", sealBody, &sealed); err != nil {
			return err
		}
		openBody := []byte(fmt.Sprintf(`{"requestState":%q,"principal":"alice","request":{"method":"tools/call","params":%s}}`, sealed.RequestState, toolCallParams))
		var opened struct{ Payload []byte }
		if err := post(ctx, addrs[(i+1)%len(addrs)], "open", openBody, &opened); err != nil {
			return err
		}
		if len(opened.Payload) != size {
			return fmt.Errorf("open returned %d bytes of payload, want %d", len(opened.Payload), size)
		}
		return nil
	}
}

// restError returns a REST refusal as the status it carries, so that it is
// counted by its ErrorInfo reason as a gRPC refusal is.
func restError(httpCode int, body []byte) error {
	var m struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	}
	if json.Unmarshal(body, &m) != nil || m.Code == 0 {
		return fmt.Errorf("HTTP %d", httpCode)
	}
	st := status.New(codes.Code(m.Code), m.Message)
	for _, d := range m.Details {
		if d.Reason != "" {
			if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: d.Reason}); err == nil {
				st = withInfo
			}
		}
	}
	return st.Err()
}

// reportFloors prints each op's share of its echo floor (op@echo), level by
// level, from the median runs, with the CPU time each server spent per op
// when its PID was given.
func reportFloors(ops []string, levels []int, medians map[string][]*result) {
	header := false
	for _, name := range ops {
		floor, ok := medians[name+"@echo"]
		if strings.HasSuffix(name, "@echo") || !ok {
			continue
		}
		if !header {
			fmt.Printf("\n| call | concurrency | ops/s | floor ops/s | share of floor | sealer CPU/op | floor CPU/op |\n|---|---|---|---|---|---|---|\n")
			header = true
		}
		for k, n := range levels {
			r, e := medians[name][k], floor[k]
			fmt.Printf("| %s | %d | %.0f | %.0f | %.0f%% | %s | %s |\n", name, n, r.rate(), e.rate(), 100*r.rate()/e.rate(), r.cpuPerOp(), e.cpuPerOp())
		}
	}
}
