// Package reasons maps the sealer's errors to the reasons of the API's enum
// and back. What a reason means (its gRPC code, whether it refuses the
// client's state, whether a retry may succeed) is the enum value's option
// rule in proto/sealer/v1/sealer.proto, read here as every client reads
// it; this package adds only what is Go's: the error that stands for each
// reason, and whether its text may reach the caller. The service converts
// its errors to statuses with it, the Go client converts statuses back to
// errors with it, and the proxy names errors with it (through
// client.Reason), so that a new reason is one value in the proto enum, one
// row here, and its line in the README's table (which server/errors_test.go
// holds to the enum).
package reasons

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// Errors of the service that neither the core nor the ledger returns.
var (
	// ErrBadRequest marks a request the service finds malformed itself.
	ErrBadRequest = errors.New("sealer: invalid request")
	// ErrUnauthenticated marks a caller without valid credentials.
	ErrUnauthenticated = errors.New("sealer: unauthenticated")
	// ErrResourceExhausted marks a call refused by a tenant's rate or
	// concurrency limit, or by the server's calls in flight.
	ErrResourceExhausted = errors.New("sealer: tenant limit exceeded")
	// ErrKeysUnavailable means no key ring has been loaded yet.
	ErrKeysUnavailable = errors.New("sealer: no keys loaded yet")
)

// A Row is one error of the table.
type Row struct {
	// Err is the error that stands for the reason: the service sends the
	// reason for any error that errors.Is matches to it, and the client
	// returns an error that matches it.
	Err    error
	Reason sealerv1.Reason
	// Detail says that the error's whole text may go to the caller: it
	// says what is wrong and never quotes a secret. Otherwise the caller
	// gets Err's text only.
	Detail bool
}

// Rule is what reason r means to its caller, as the proto says it (the
// option rule of its enum value); the zero rule for a value without one.
func Rule(r sealerv1.Reason) *sealerv1.ReasonRule {
	if rule, ok := rules[r]; ok {
		return rule
	}
	return &sealerv1.ReasonRule{}
}

// rules holds the option rule of every value of the enum, read once.
var rules = func() map[sealerv1.Reason]*sealerv1.ReasonRule {
	values := sealerv1.Reason(0).Descriptor().Values()
	m := make(map[sealerv1.Reason]*sealerv1.ReasonRule, values.Len())
	for i := range values.Len() {
		v := values.Get(i)
		m[sealerv1.Reason(v.Number())] = proto.GetExtension(v.Options(), sealerv1.E_Rule).(*sealerv1.ReasonRule)
	}
	return m
}()

// Code is the gRPC code of a status that carries reason r.
func Code(r sealerv1.Reason) codes.Code { return codes.Code(Rule(r).GetGrpcCode()) }

// Rejects reports whether reason r refuses the client's state, which an MCP
// server answers as invalid params (client.Rejected).
func Rejects(r sealerv1.Reason) bool { return Rule(r).GetRejects() }

// Retryable reports whether the same call may succeed later after reason r.
func Retryable(r sealerv1.Reason) bool { return Rule(r).GetRetryable() }

// Table is the table, first match first. A reason may have several rows;
// the client returns the first row's Err for it. REASON_INTERNAL has none:
// it is the reason of every other error, whose cause is logged only.
var Table = []Row{
	{sealer.ErrInvalid, sealerv1.Reason_REASON_INVALID_STATE, false},
	{sealer.ErrExpired, sealerv1.Reason_REASON_EXPIRED, false},
	{sealer.ErrPrincipalMismatch, sealerv1.Reason_REASON_PRINCIPAL_MISMATCH, false},
	{sealer.ErrRequestMismatch, sealerv1.Reason_REASON_REQUEST_MISMATCH, false},
	{sealer.ErrInputMismatch, sealerv1.Reason_REASON_INPUT_MISMATCH, false},
	{sealer.ErrFlowExpired, sealerv1.Reason_REASON_FLOW_EXPIRED, false},
	{sealer.ErrFlowExhausted, sealerv1.Reason_REASON_FLOW_EXHAUSTED, false},
	{ledger.ErrConflict, sealerv1.Reason_REASON_OUTCOME_CONFLICT, false}, // before ErrConsumed, which it wraps
	{ledger.ErrConsumed, sealerv1.Reason_REASON_ALREADY_CONSUMED, false},
	{ledger.ErrPending, sealerv1.Reason_REASON_IN_PROGRESS, false},
	{ledger.ErrUnavailable, sealerv1.Reason_REASON_LEDGER_UNAVAILABLE, false},
	{sealer.ErrArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true},
	{sealer.ErrMethod, sealerv1.Reason_REASON_INVALID_ARGUMENT, true},
	{ErrBadRequest, sealerv1.Reason_REASON_INVALID_ARGUMENT, true},
	{ErrKeysUnavailable, sealerv1.Reason_REASON_KEYS_UNAVAILABLE, false},
	{ErrUnauthenticated, sealerv1.Reason_REASON_UNAUTHENTICATED, true},
	{ErrResourceExhausted, sealerv1.Reason_REASON_RESOURCE_EXHAUSTED, true},
}

// Text is the reason as the wire carries it, in ErrorInfo.reason and in the
// metrics: the enum value's name without the prefix that buf lint demands
// (REASON_EXPIRED is "EXPIRED").
func Text(r sealerv1.Reason) string {
	return strings.TrimPrefix(r.String(), "REASON_")
}

// Parse reads a reason as Text writes it; anything else is
// REASON_UNSPECIFIED.
func Parse(s string) sealerv1.Reason {
	return sealerv1.Reason(sealerv1.Reason_value["REASON_"+s])
}

// Of returns the first row whose Err err matches, and false when none does.
func Of(err error) (Row, bool) {
	for _, r := range Table {
		if errors.Is(err, r.Err) {
			return r, true
		}
	}
	return Row{}, false
}
