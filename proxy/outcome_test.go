package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/client"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// serve posts body to h and returns the answer's status, media type and
// body.
func serve(h http.Handler, body string) (int, string, string) {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Header().Get("Content-Type"), w.Body.String()
}

// TestProxy_RecordsTheAnswerTheClientGot: a call whose open consumed its
// state for an outcome has the JSON-RPC response the client got recorded,
// without jsonrpc and id, its state sealed; the client's answer is the one
// it gets with recording off. No response to the call's id in a 2xx answer
// records none.
func TestProxy_RecordsTheAnswerTheClientGot(t *testing.T) {
	const progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	for _, tc := range []struct {
		name, contentType string
		status            int
		body              string
		sealErr           error
		want              string // the outcome recorded; "" for none
	}{
		{"a complete result", "application/json", 200, `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`,
			nil, `{"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`},
		{"the next round, its state sealed", "application/json", 200,
			`{"jsonrpc":"2.0","id":5,"result":{"resultType":"input_required","inputRequests":{"k":{}},"requestState":"plain-secret"}}`,
			nil, `{"result":{"resultType":"input_required","inputRequests":{"k":{}},"requestState":"SEALED"}}`},
		{"the handler's error", "application/json", 200, `{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"card declined"}}`,
			nil, `{"error":{"code":-32000,"message":"card declined"}}`},
		{"in an SSE stream, after a notification", "text/event-stream", 200,
			"data: " + progress + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]}}\n\n", nil, `{"result":{"content":[]}}`},
		{"the next round in an SSE stream", "text/event-stream", 200,
			"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"inputRequests\":{\"k\":{}},\"requestState\":\"plain-secret\"}}\n\n",
			nil, `{"result":{"inputRequests":{"k":{}},"requestState":"SEALED"}}`},
		{"the id written 5.0", "application/json", 200, `{"jsonrpc":"2.0","id":5.0,"result":{}}`, nil, `{"result":{}}`},
		{"the proxy's error for a state it could not seal", "application/json", 200,
			`{"jsonrpc":"2.0","id":5,"result":{"inputRequests":{"k":{}},"requestState":"plain-secret"}}`, ledger.ErrUnavailable, ""},
		{"the proxy's error for a state it could not seal, in an SSE stream", "text/event-stream", 200,
			"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"inputRequests\":{\"k\":{}},\"requestState\":\"plain-secret\"}}\n\n", ledger.ErrUnavailable, ""},
		{"a response to another id", "application/json", 200, `{"jsonrpc":"2.0","id":6,"result":{}}`, nil, ""},
		{"the id as a string", "application/json", 200, `{"jsonrpc":"2.0","id":"5","result":{}}`, nil, ""},
		{"an SSE stream that ends without the response", "text/event-stream", 200, "data: " + progress + "\n\n", nil, ""},
		{"an HTTP error", "application/json", 500, `{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"down"}}`, nil, ""},
		{"a body the proxy cannot read", "text/plain", 200, `{"jsonrpc":"2.0","id":5,"result":{}}`, nil, ""},
		{"an SSE event the proxy cannot read", "text/event-stream", 200, "data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}} x\n\n", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamStatus(t, tc.status, tc.contentType, tc.body)
			off := &fakeSealer{recording: true, sealErr: tc.sealErr}
			_, _, plain := serve(newProxy(t, up, off, func(c *Config) { c.RecordOutcomes = false }), retryBody)
			fs := &fakeSealer{recording: true, sealErr: tc.sealErr}
			_, _, got := serve(newProxy(t, up, fs, nil), retryBody)
			if got != plain {
				t.Errorf("the client got %q recording, %q not; want the same", got, plain)
			}
			if len(off.records) != 0 || len(off.askedRecord) != 1 || off.askedRecord[0] {
				t.Errorf("recording off: opened asking %v, recorded %v; want neither", off.askedRecord, off.records)
			}
			want := []record{{"S", tc.want}}
			if len(fs.records) != 1 || fs.records[0] != want[0] {
				t.Errorf("recorded %q, want %q", fs.records, want)
			}
		})
	}
	t.Run("an upstream that does not answer", func(t *testing.T) {
		up := upstreamStatus(t, 200, "application/json", "{}")
		up.Close()
		fs := &fakeSealer{recording: true}
		if status, _, _ := serve(newProxy(t, up, fs, nil), retryBody); status != http.StatusBadGateway || len(fs.records) != 1 || fs.records[0] != (record{"S", ""}) {
			t.Errorf("got %d, recorded %q; want 502 and none recorded", status, fs.records)
		}
	})
	t.Run("an open that consumed nothing records nothing", func(t *testing.T) {
		up := upstreamStatus(t, 200, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
		fs := &fakeSealer{}
		serve(newProxy(t, up, fs, nil), retryBody)
		if len(fs.askedRecord) != 1 || !fs.askedRecord[0] || len(fs.records) != 0 {
			t.Errorf("opened asking %v, recorded %q; want asked, nothing recorded", fs.askedRecord, fs.records)
		}
	})
}

// TestProxy_ReplaysARecordedOutcome: a retry whose open returns an outcome
// is answered with it under the retry's own id, as a JSON body, and the
// upstream is not called.
func TestProxy_ReplaysARecordedOutcome(t *testing.T) {
	for _, tc := range []struct{ name, id, outcome, want string }{
		{"a result", `"retry-2"`, `{"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`,
			`{"jsonrpc":"2.0","id":"retry-2","result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`},
		{"an error", `17`, `{"error":{"code":-32000,"message":"card declined"}}`,
			`{"jsonrpc":"2.0","id":17,"error":{"code":-32000,"message":"card declined"}}`},
		{"not an outcome", `17`, `{"content":[]}`,
			`{"jsonrpc":"2.0","id":17,"error":{"code":-32603,"message":"the recorded answer to this request could not be read"}}`},
		{"both members", `17`, `{"result":{},"error":{}}`,
			`{"jsonrpc":"2.0","id":17,"error":{"code":-32603,"message":"the recorded answer to this request could not be read"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, "application/json", `{"jsonrpc":"2.0","id":5,"result":{}}`)
			fs := &fakeSealer{outcome: []byte(tc.outcome)}
			body := strings.Replace(retryBody, `"id":5`, `"id":`+tc.id, 1)
			_, ct, got := serve(newProxy(t, up, fs, nil), body)
			if got != tc.want || ct != "application/json" || up.calls != 0 || len(fs.records) != 0 {
				t.Errorf("got %s %s, %d upstream calls, records %q; want %s, none, none", ct, got, up.calls, fs.records, tc.want)
			}
		})
	}
}

// TestProxy_InProgressIsRetryable: a retry while the call still runs gets
// a retryable -32603 that says so, and the upstream is not called.
func TestProxy_InProgressIsRetryable(t *testing.T) {
	up := newUpstream(t, "application/json", `{}`)
	h := newProxy(t, up, &fakeSealer{openErr: client.ErrInProgress}, nil)
	resp, m := post(h, retryBody, "Authorization", "Bearer tok")
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || errorCode(m) != "id 5 code -32603" ||
		data["retryable"] != true || data["reason"] != "in_progress" || up.calls != 0 {
		t.Errorf("got %d, Retry-After %q, %v, %d upstream calls; want 503, a Retry-After, a retryable -32603 in_progress, none",
			resp.StatusCode, resp.Header.Get("Retry-After"), m, up.calls)
	}
}

// TestProxy_AFailedRecordChangesNoAnswer: a Record that fails is logged
// (without the state or the answer) and counted; the client's answer is
// the same.
func TestProxy_AFailedRecordChangesNoAnswer(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`
	up := newUpstream(t, "application/json", answer)
	var logs bytes.Buffer
	fs := &fakeSealer{recording: true, recordErr: ledger.ErrUnavailable}
	p := newProxy(t, up, fs, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) }).(*Proxy)
	status, _, got := serve(p, strings.Replace(retryBody, `"S"`, `"STATE-SECRET"`, 1))
	if status != 200 || got != answer {
		t.Errorf("got %d %s, want 200 %s", status, got, answer)
	}
	if !strings.Contains(logs.String(), `"outcome not recorded`) || strings.Contains(logs.String(), "STATE-SECRET") || strings.Contains(logs.String(), "Paid") {
		t.Errorf("logged %s; want the failure, without the state or the answer", logs.String())
	}
	if n := testutil.ToFloat64(p.metrics.outcomes.WithLabelValues("tools/call", outcomeFailed)); n != 1 {
		t.Errorf("record_failed counted %v, want 1", n)
	}
}

// TestProxy_TheAnswerIsOutBeforeItIsRecorded: the client reads its whole
// answer, a JSON body or the SSE event that holds it, while Record has not
// returned.
func TestProxy_TheAnswerIsOutBeforeItIsRecorded(t *testing.T) {
	const msg = `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`
	for _, tc := range []struct{ contentType, body string }{
		{"application/json", msg},
		{"text/event-stream", "data: " + msg + "\n\n"},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			up := newUpstream(t, tc.contentType, tc.body)
			fs := &fakeSealer{recording: true, hold: make(chan struct{})}
			srv := httptest.NewServer(newProxy(t, up, fs, nil))
			t.Cleanup(srv.Close)
			defer close(fs.hold)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(retryBody))
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got string
			if tc.contentType == "application/json" {
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			} else {
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				got = strings.TrimSpace(strings.TrimPrefix(line, "data: "))
			}
			if !json.Valid([]byte(got)) || got != msg {
				t.Errorf("got %q while Record waits, want %q", got, msg)
			}
		})
	}
}
