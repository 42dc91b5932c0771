package client

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/mcpdigest"
	"github.com/mcp-sealer/sealer/sealer"
	"github.com/mcp-sealer/sealer/server"
)

// A retry whose first open's handler still runs is IN_PROGRESS: the client
// returns ErrInProgress, which is no rejection (the MCP server answers
// "retry later", never -32602) and keeps its gRPC status.
func TestFromStatus_InProgress(t *testing.T) {
	err := fromStatus(mustStatus(t, codes.Aborted, "IN_PROGRESS", "ledger: outcome not recorded yet"))
	switch {
	case !errors.Is(err, ErrInProgress) || !errors.Is(err, ledger.ErrPending):
		t.Errorf("got %v, want ErrInProgress (ledger.ErrPending)", err)
	case Rejected(err):
		t.Error("Rejected is true for IN_PROGRESS, want false: the state is not refused")
	case Reason(err) != "IN_PROGRESS":
		t.Errorf("Reason %q, want IN_PROGRESS", Reason(err))
	case err.Error() != "ledger: outcome not recorded yet":
		t.Errorf("got %q, want the sealer's message once", err.Error())
	}
}

// outcomeSealer keeps the Open and Record requests it gets and answers with
// its fields.
type outcomeSealer struct {
	sealerv1.UnimplementedSealerServer
	mu      sync.Mutex
	opens   []*sealerv1.OpenRequest
	records []*sealerv1.RecordRequest
	open    *sealerv1.OpenResponse
	err     error
}

func (f *outcomeSealer) Open(_ context.Context, r *sealerv1.OpenRequest) (*sealerv1.OpenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens = append(f.opens, r)
	return f.open, f.err
}

func (f *outcomeSealer) Record(_ context.Context, r *sealerv1.RecordRequest) (*sealerv1.RecordResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, r)
	if f.err != nil {
		return nil, f.err
	}
	return &sealerv1.RecordResponse{KeptUntil: timestamppb.Now()}, nil
}

// What goes on the wire: RecordOutcome as record_outcome, Record as the
// state and the outcome's bytes; and what comes back: recording, and an
// outcome (never nil, even empty) with its time.
func TestClient_OutcomeRequests(t *testing.T) {
	fake := &outcomeSealer{}
	sc := dialFake(t, fake)
	ctx := context.Background()
	call := ToolCall("pay", []byte(`{"amount":42}`))
	at := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		record        bool
		resp          *sealerv1.OpenResponse
		wantRecording bool
		wantOutcome   []byte
	}{
		{"not asked", false, &sealerv1.OpenResponse{Payload: []byte("p")}, false, nil},
		{"asked, recording", true, &sealerv1.OpenResponse{Payload: []byte("p"), Recording: true}, true, nil},
		{"asked, an outcome", true, &sealerv1.OpenResponse{Outcome: &sealerv1.Outcome{Data: []byte(`{"result":{}}`), RecordedAt: timestamppb.New(at)}}, false, []byte(`{"result":{}}`)},
		{"asked, an empty outcome", true, &sealerv1.OpenResponse{Outcome: &sealerv1.Outcome{RecordedAt: timestamppb.New(at)}}, false, []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.open, fake.opens = tc.resp, nil
			o, err := sc.Open(ctx, OpenRequest{State: "S", Principal: "alice", Request: call, RecordOutcome: tc.record})
			if err != nil {
				t.Fatal(err)
			}
			if got := fake.opens[0].GetRecordOutcome(); got != tc.record {
				t.Errorf("record_outcome sent %v, want %v", got, tc.record)
			}
			if o.Recording != tc.wantRecording {
				t.Errorf("Recording %v, want %v", o.Recording, tc.wantRecording)
			}
			if (o.Outcome == nil) != (tc.wantOutcome == nil) || !bytes.Equal(o.Outcome, tc.wantOutcome) {
				t.Errorf("Outcome %q (nil %v), want %q (nil %v)", o.Outcome, o.Outcome == nil, tc.wantOutcome, tc.wantOutcome == nil)
			}
			if tc.wantOutcome != nil && !o.RecordedAt.Equal(at) {
				t.Errorf("RecordedAt %v, want %v", o.RecordedAt, at)
			}
			if o.State != "S" {
				t.Errorf("State %q, want S", o.State)
			}
		})
	}

	if err := sc.Record(ctx, "S", []byte(`{"result":{"content":[]}}`)); err != nil {
		t.Fatal(err)
	}
	want := &sealerv1.RecordRequest{RequestState: "S", Outcome: []byte(`{"result":{"content":[]}}`)}
	if got := fake.records[len(fake.records)-1]; !proto.Equal(got, want) {
		t.Errorf("Record sent %v, want %v", got, want)
	}
	fake.err = mustStatus(t, codes.InvalidArgument, "INVALID_ARGUMENT", "sealer: invalid request: outcome of 70000 bytes over this sealer's limit of 65536")
	if err := sc.Record(ctx, "S", make([]byte, 70000)); !errors.Is(err, ErrInvalidArgument) || Rejected(err) {
		t.Errorf("Record over the limit: got %v, want ErrInvalidArgument, not Rejected", err)
	}
	fake.err = mustStatus(t, codes.Aborted, "IN_PROGRESS", "")
	if _, err := sc.Open(ctx, OpenRequest{State: "S", Principal: "alice", Request: call, RecordOutcome: true}); !errors.Is(err, ErrInProgress) || Rejected(err) {
		t.Errorf("Open in progress: got %v, want ErrInProgress, not Rejected", err)
	}
}

// recordingOpen starts a sealer that waits a minute for outcomes, seals a
// one-time state of a pay call for alice and opens it with RecordOutcome:
// the retry's request, and what that first open returned.
func recordingOpen(t *testing.T) (*Client, OpenRequest, *Opened) {
	t.Helper()
	sc := startSealer(t, func(c *server.Config) { c.OutcomeWait = time.Minute })
	ctx := context.Background()
	call := ToolCall("pay", []byte(`{"amount":42}`))
	state, _, err := sc.Seal(ctx, SealRequest{Principal: "alice", Request: call, Payload: []byte("p"), TTL: time.Minute, OneTime: true})
	if err != nil {
		t.Fatal(err)
	}
	retry := OpenRequest{State: state, Principal: "alice", Request: call, RecordOutcome: true}
	first, err := sc.Open(ctx, retry)
	if err != nil || !first.Recording || first.Outcome != nil || string(first.Payload) != "p" {
		t.Fatalf("first open: got %+v, %v; want the payload, Recording, no outcome", first, err)
	}
	return sc, retry, first
}

// Against a real sealer: the open that consumes a one-time state records;
// its retry waits for the outcome (ErrInProgress at its deadline) and then
// gets it; a retry that fails a check gets that check's error, never the
// outcome; a second Record is ledger.ErrConsumed.
func TestClient_RecordedOutcome(t *testing.T) {
	sc, retry, first := recordingOpen(t)
	ctx := context.Background()

	// The sealer answers IN_PROGRESS a tenth of the deadline before it (at
	// least 50ms), to leave the answer time to arrive: 5s leaves it half a
	// second, enough on a loaded machine.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := sc.Open(short, retry)
	cancel()
	if !errors.Is(err, ErrInProgress) || Rejected(err) {
		t.Errorf("a retry before the outcome is recorded: got %v, want ErrInProgress, not Rejected", err)
	}

	answer := []byte(`{"result":{"content":[{"type":"text","text":"Paid 42.00"}]}}`)
	if err := sc.Record(ctx, first.State, answer); err != nil {
		t.Fatal(err)
	}
	again, err := sc.Open(ctx, retry)
	if err != nil || again.Recording || !bytes.Equal(again.Outcome, answer) || len(again.Payload) != 0 || again.RecordedAt.IsZero() {
		t.Fatalf("the retry: got %+v, %v; want the outcome, no payload, not Recording", again, err)
	}

	other := retry
	other.Principal = "mallory"
	_, errMallory := sc.Open(ctx, other)
	other = retry
	other.Request = ToolCall("pay", []byte(`{"amount":4200}`))
	_, errArguments := sc.Open(ctx, other)
	other = retry
	other.RecordOutcome = false
	_, errNotAsked := sc.Open(ctx, other)
	errTwice := sc.Record(ctx, first.State, []byte(`{"result":{}}`))
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"another principal", errMallory, sealer.ErrPrincipalMismatch},
		{"other arguments", errArguments, sealer.ErrRequestMismatch},
		{"without record_outcome", errNotAsked, ledger.ErrConsumed},
		{"a second Record", errTwice, ledger.ErrConsumed},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

// An answer no sealer keeps, too large for the call to reach one, is
// recorded as none: a retry is refused at once instead of waiting out
// --outcome-wait.
func TestClient_RecordOverEverySealersLimitRecordsNone(t *testing.T) {
	sc, retry, _ := recordingOpen(t)
	ctx := context.Background()
	if err := sc.Record(ctx, retry.State, make([]byte, 3<<20)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Record of 3 MiB: got %v, want ErrInvalidArgument", err)
	}
	// A deadline well inside --outcome-wait: a retry that waited for an
	// outcome would end IN_PROGRESS.
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := sc.Open(short, retry); !errors.Is(err, ledger.ErrConsumed) {
		t.Errorf("retry: got %v, want ledger.ErrConsumed (none recorded)", err)
	}
}

// Every reason the sealer sends matches one error of this package: a caller
// needs no other import to tell them.
func TestEveryReasonHasAnErrorHere(t *testing.T) {
	here := []error{ErrInvalidState, ErrExpired, ErrPrincipalMismatch, ErrRequestMismatch, ErrInputMismatch, ErrFlowExpired,
		ErrFlowExhausted, ErrAlreadyConsumed, ErrLedgerUnavailable, ErrInvalidArgument, ErrUnauthenticated, ErrResourceExhausted,
		ErrKeysUnavailable, ErrInProgress, ErrOutcomeConflict}
	values := sealerv1.Reason(0).Descriptor().Values()
	for i := range values.Len() {
		r := sealerv1.Reason(values.Get(i).Number())
		if r == sealerv1.Reason_REASON_UNSPECIFIED || r == sealerv1.Reason_REASON_INTERNAL {
			continue // no error stands for these: the status's message says all
		}
		sentinel := sentinelOf(r)
		found := false
		for _, e := range here {
			found = found || e == sentinel
		}
		if sentinel == nil || !found {
			t.Errorf("%v: no error of package client stands for it", r)
		}
	}
}

// Issue 50, 5b: Binding.Answers goes on the wire as answers, as it is (none
// for nil), and OUTCOME_CONFLICT comes back as ErrOutcomeConflict: a
// rejection, which matches ErrAlreadyConsumed too.
func TestClient_Answers(t *testing.T) {
	fake := &outcomeSealer{open: &sealerv1.OpenResponse{Payload: []byte("p"), Recording: true}}
	sc := dialFake(t, fake)
	ctx := context.Background()
	call := ToolCall("book", []byte(`{"flight":"LH1"}`))
	if _, err := sc.Open(ctx, OpenRequest{State: "S", Principal: "alice", Request: call, RecordOutcome: true}); err != nil {
		t.Fatal(err)
	}
	d, err := mcpdigest.Answers([]byte(`{"seat":{"action":"accept","content":{"seat":"12A"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	call.Answers = d[:]
	if _, err := sc.Open(ctx, OpenRequest{State: "S", Principal: "alice", Request: call, RecordOutcome: true}); err != nil {
		t.Fatal(err)
	}
	if got := fake.opens[0].GetAnswers(); got != nil {
		t.Errorf("answers sent without Answers: %x, want none", got)
	}
	if got := fake.opens[1].GetAnswers(); !bytes.Equal(got, d[:]) {
		t.Errorf("answers sent: %x, want %x", got, d[:])
	}
	fake.err = mustStatus(t, codes.AlreadyExists, "OUTCOME_CONFLICT", "ledger: state already consumed by an open with other answers")
	_, err = sc.Open(ctx, OpenRequest{State: "S", Principal: "alice", Request: call, RecordOutcome: true})
	switch {
	case !errors.Is(err, ErrOutcomeConflict) || !errors.Is(err, ErrAlreadyConsumed):
		t.Errorf("got %v, want ErrOutcomeConflict, which is ErrAlreadyConsumed too", err)
	case !Rejected(err):
		t.Error("Rejected is false for OUTCOME_CONFLICT, want true: the state is refused")
	case Reason(err) != "OUTCOME_CONFLICT":
		t.Errorf("Reason %q, want OUTCOME_CONFLICT", Reason(err))
	}
}
