package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/ledger"
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
	cfg.ShutdownDelay = 0
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

// A tool that asks twice seals its rounds as one flow: the retry must answer
// exactly the keys its round asked, and once a round opened, no earlier one
// opens again.
func ExampleFlowRequest() {
	addr, stop := startSealer()
	defer stop()
	sc, err := client.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	ctx := context.Background()
	call := client.ToolCall("book_trip", json.RawMessage(`{"city":"Paris"}`))
	flow := client.FlowRequest{LatestOnly: true}

	// Round 1 asks for the dates: a new flow.
	flow.Asked = []string{"dates"}
	state1, _, err := sc.Seal(ctx, client.SealRequest{Principal: "alice", Request: call, Payload: []byte(`{"step":1}`), Flow: flow.After(nil)})
	if err != nil {
		panic(err)
	}

	// The retry answers the dates, and something it was not asked.
	retry := call
	retry.Responded = []string{"dates", "discount"}
	_, err = sc.Open(ctx, client.OpenRequest{State: state1, Principal: "alice", Request: retry})
	fmt.Println(client.Rejected(err), errors.Is(err, sealer.ErrInputMismatch))

	// The retry answers what was asked; round 2 asks for a seat.
	retry.Responded = []string{"dates"}
	opened, err := sc.Open(ctx, client.OpenRequest{State: state1, Principal: "alice", Request: retry})
	if err != nil {
		panic(err)
	}
	flow.Asked = []string{"seat"}
	state2, _, err := sc.Seal(ctx, client.SealRequest{Principal: "alice", Request: call, Payload: []byte(`{"step":2}`), Flow: flow.After(opened)})
	if err != nil {
		panic(err)
	}
	retry.Responded = []string{"seat"}
	opened, err = sc.Open(ctx, client.OpenRequest{State: state2, Principal: "alice", Request: retry})
	fmt.Printf("round %d: %s, latest only %v\n", opened.Flow.Round, opened.Payload, opened.Flow.LatestOnly)

	// Round 1 again, after round 2 opened: refused.
	retry.Responded = []string{"dates"}
	_, err = sc.Open(ctx, client.OpenRequest{State: state1, Principal: "alice", Request: retry})
	fmt.Println(client.Rejected(err), errors.Is(err, ledger.ErrConsumed))
	// Output:
	// true true
	// round 2: {"step":2}, latest only true
	// true true
}

// A one-time tool records the answer it sends: when that answer is lost on
// the way back, the client's retry of the same state gets it again, and the
// tool does not act twice.
func ExampleClient_Record() {
	addr, stop := startSealer()
	defer stop()
	sc, err := client.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer sc.Close()
	ctx := context.Background()
	call := client.ToolCall("pay", json.RawMessage(`{"amount":42}`))
	state, _, err := sc.Seal(ctx, client.SealRequest{Principal: "alice", Request: call, OneTime: true})
	if err != nil {
		panic(err)
	}

	payments := 0
	handle := func() string {
		opened, err := sc.Open(ctx, client.OpenRequest{State: state, Principal: "alice", Request: call, RecordOutcome: true})
		switch {
		case client.Rejected(err):
			return "refused: " + client.Reason(err)
		case errors.Is(err, client.ErrInProgress):
			return "still in progress: retry later"
		case err != nil:
			panic(err)
		case opened.Outcome != nil:
			return string(opened.Outcome) // as recorded; no second payment
		}
		payments++
		answer := fmt.Sprintf(`{"result":{"content":[{"type":"text","text":"paid 42, payment %d"}]}}`, payments)
		if opened.Recording {
			if err := sc.Record(ctx, opened.State, []byte(answer)); err != nil {
				log.Printf("recording the answer: %v", err) // answer anyway
			}
		}
		return answer
	}
	fmt.Println(handle()) // the answer is lost on the way back
	fmt.Println(handle()) // the client retries
	fmt.Println("payments:", payments)
	// Output:
	// {"result":{"content":[{"type":"text","text":"paid 42, payment 1"}]}}
	// {"result":{"content":[{"type":"text","text":"paid 42, payment 1"}]}}
	// payments: 1
}
