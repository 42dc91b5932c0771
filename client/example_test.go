package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server"
)

// startSealer runs a sealer in process on free loopback ports, for the
// examples, and returns its gRPC address.
func startSealer() (string, func()) {
	dir, _ := os.MkdirTemp("", "sealer-example-")
	cfg := server.Defaults()
	cfg.DataDir, cfg.GRPCAddr, cfg.HTTPAddr = dir, "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.New(ctx, cfg)
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return s.GRPCAddr().String(), func() { cancel(); <-done; os.RemoveAll(dir) }
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
	name, args := "get_weather", json.RawMessage(`{"location":"Paris"}`)
	state, _, err := sc.Seal(ctx, client.SealRequest{
		Principal: "alice", Request: client.ToolCall(name, args), Payload: []byte(`{"step":1}`), TTL: time.Minute,
	})
	if err != nil {
		panic(err)
	}

	// Round 2: the client's retry of the same call carries the state.
	opened, err := sc.Open(ctx, client.OpenRequest{State: state, Principal: "alice", Request: client.ToolCall(name, args)})
	fmt.Printf("%s %v\n", opened.Payload, err)

	// Someone else presenting the same state is refused.
	_, err = sc.Open(ctx, client.OpenRequest{State: state, Principal: "mallory", Request: client.ToolCall(name, args)})
	fmt.Println(client.Rejected(err), errors.Is(err, sealer.ErrPrincipalMismatch))
	// Output:
	// {"step":1} <nil>
	// true true
}
