package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/server"
)

// startSealer runs a sealer in process on a free loopback port, for the
// examples, and returns its gRPC address.
func startSealer() (string, func()) {
	dir, _ := os.MkdirTemp("", "sealer-example-")
	free := func() string {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		defer l.Close()
		return l.Addr().String()
	}
	cfg := server.Defaults()
	cfg.DataDir, cfg.GRPCAddr, cfg.HTTPAddr = dir, free(), free()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { server.Run(ctx, cfg); close(done) }()
	for range 100 {
		if c, err := net.Dial("tcp", cfg.GRPCAddr); err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cfg.GRPCAddr, func() { cancel(); <-done; os.RemoveAll(dir) }
}

// An MCP tool handler seals its progress when it needs input, and opens it
// when the client retries.
func Example() {
	addr, stop := startSealer()
	defer stop()
	sc, err := client.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	ctx := context.Background()

	// Round 1: the tools/call as the MCP server received it.
	call := &mcp.CallToolParamsRaw{Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)}
	state, _, err := sc.Seal(ctx, client.SealRequest{
		Principal: "alice", Request: client.ToolCall(call), Payload: []byte(`{"step":1}`), TTL: time.Minute,
	})
	if err != nil {
		panic(err)
	}

	// Round 2: the client's retry carries the state and its answers.
	call.RequestState = state
	call.InputResponses = mcp.InputResponseMap{"units": &mcp.ElicitResult{Action: "accept"}}
	opened, err := sc.Open(ctx, client.OpenRequest{State: call.RequestState, Principal: "alice", Request: client.ToolCall(call)})
	fmt.Printf("%s %v\n", opened.Payload, err)

	// Someone else presenting the same state is refused.
	_, err = sc.Open(ctx, client.OpenRequest{State: state, Principal: "mallory", Request: client.ToolCall(call)})
	fmt.Println(client.Rejected(err), client.InvalidParams(err).Code)
	// Output:
	// {"step":1} <nil>
	// true -32602
}
