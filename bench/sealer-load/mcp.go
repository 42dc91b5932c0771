package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The MCP ops: a whole MRTR round trip over Streamable HTTP (tools/call of
// get_weather, an input_required result with a state, the retry with the
// state and the answer, the complete result), as an MCP client makes it:
//
//	mcp-mrtr         through sealer-proxy (-mcp-url): one Seal and one Open
//	mcp-mrtr@direct  to the MCP server itself (-mcp-direct-url): the floor
//	mcp-mrtr@floor   through a plain httputil.ReverseProxy in front of the
//	                 same server (-mcp-floor-url, bench/sealer-floorproxy):
//	                 the floor of a proxy
var (
	mcpFloorURL  = flag.String("mcp-floor-url", "http://127.0.0.1:8081/mcp", "mcp-mrtr@floor: a plain reverse proxy in front of the MCP server")
	mcpURL       = flag.String("mcp-url", "http://127.0.0.1:8080/mcp", "mcp-mrtr: the MCP endpoint of sealer-proxy")
	mcpDirectURL = flag.String("mcp-direct-url", "http://127.0.0.1:3001/mcp", "mcp-mrtr@direct: the MCP endpoint of the server behind it")
)

// mcpOp returns the MCP op called name, if it is one.
func mcpOp(name string) (op, string, bool) {
	switch name {
	case "mcp-mrtr":
		return mcpRoundTrip(*mcpURL), "MCP round trip (2 calls) through sealer-proxy", true
	case "mcp-mrtr@direct":
		return mcpRoundTrip(*mcpDirectURL), "floor: MCP round trip (2 calls) direct to the server", true
	case "mcp-mrtr@floor":
		return mcpRoundTrip(*mcpFloorURL), "floor: MCP round trip (2 calls) through httputil.ReverseProxy", true
	}
	return nil, "", false
}

func mcpRoundTrip(url string) op {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"sealer-load","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	call := func(ctx context.Context, id int, extra string) (*mcpResult, error) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":"get_weather","arguments":{"location":"New York"}%s}}`, id, meta, extra)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "get_weather")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return readMCPResponse(resp)
	}
	return func(ctx context.Context, i int) error {
		r1, err := call(ctx, 2*i, "")
		if err != nil {
			return err
		}
		if r1.Result.ResultType != "input_required" || r1.Result.RequestState == "" {
			return fmt.Errorf("round 1: got %+v, want input_required with a state", r1.Result)
		}
		state, _ := json.Marshal(r1.Result.RequestState)
		r2, err := call(ctx, 2*i+1, `,"requestState":`+string(state)+`,"inputResponses":{"units":{"action":"accept","content":{"units":"celsius"}}}`)
		if err != nil {
			return err
		}
		if r2.Result.ResultType != "complete" {
			return fmt.Errorf("round 2: got %+v, want complete", r2)
		}
		return nil
	}
}

type mcpResult struct {
	Result struct{ ResultType, RequestState string }
	Error  *struct {
		Code    int
		Message string
	}
}

// readMCPResponse reads the JSON-RPC response from a JSON body or from the
// SSE stream that carries it.
func readMCPResponse(resp *http.Response) (*mcpResult, error) {
	var r mcpResult
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && bytes.Contains(data, []byte(`"id":`)) {
				if err := json.Unmarshal(data, &r); err != nil {
					return nil, err
				}
				break
			}
		}
		io.Copy(io.Discard, resp.Body)
	} else if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %d", r.Error.Code)
	}
	return &r, nil
}
