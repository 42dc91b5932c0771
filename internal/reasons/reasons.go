// Package reasons is the one table of the sealer's error reasons: for each
// reason of the API's enum, the Go error that stands for it, the gRPC code
// the service sends it with, and whether it refuses the client's state. The
// service converts its errors to statuses with it, the Go client converts
// statuses back to errors with it, and the proxy names errors with it
// (through client.Reason), so that a new reason is one row here, beside
// its value in the proto enum and its line in the README's table (which
// server/errors_test.go holds to this one).
package reasons

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"

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
	Code   codes.Code
	Reason sealerv1.Reason
	// Detail says that the error's whole text may go to the caller: it
	// says what is wrong and never quotes a secret. Otherwise the caller
	// gets Err's text only.
	Detail bool
	// Rejects says that the reason refuses the client's state, which an
	// MCP server answers as invalid params (client.Rejected).
	Rejects bool
}

// Table is the table, first match first. A reason may have several rows;
// the client returns the first row's Err for it. REASON_INTERNAL has none:
// it is the reason of every other error, whose cause is logged only.
var Table = []Row{
	{sealer.ErrInvalid, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_STATE, false, true},
	{sealer.ErrExpired, codes.FailedPrecondition, sealerv1.Reason_REASON_EXPIRED, false, true},
	{sealer.ErrPrincipalMismatch, codes.PermissionDenied, sealerv1.Reason_REASON_PRINCIPAL_MISMATCH, false, true},
	{sealer.ErrRequestMismatch, codes.FailedPrecondition, sealerv1.Reason_REASON_REQUEST_MISMATCH, false, true},
	{sealer.ErrInputMismatch, codes.FailedPrecondition, sealerv1.Reason_REASON_INPUT_MISMATCH, false, true},
	{sealer.ErrFlowExpired, codes.FailedPrecondition, sealerv1.Reason_REASON_FLOW_EXPIRED, false, true},
	{sealer.ErrFlowExhausted, codes.FailedPrecondition, sealerv1.Reason_REASON_FLOW_EXHAUSTED, false, true},
	{ledger.ErrConsumed, codes.AlreadyExists, sealerv1.Reason_REASON_ALREADY_CONSUMED, false, true},
	{ledger.ErrPending, codes.Aborted, sealerv1.Reason_REASON_IN_PROGRESS, false, false},
	{ledger.ErrUnavailable, codes.Unavailable, sealerv1.Reason_REASON_LEDGER_UNAVAILABLE, false, false},
	{sealer.ErrArgument, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true, false},
	{sealer.ErrMethod, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true, false},
	{ErrBadRequest, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true, false},
	{ErrKeysUnavailable, codes.Unavailable, sealerv1.Reason_REASON_KEYS_UNAVAILABLE, false, false},
	{ErrUnauthenticated, codes.Unauthenticated, sealerv1.Reason_REASON_UNAUTHENTICATED, true, false},
	{ErrResourceExhausted, codes.ResourceExhausted, sealerv1.Reason_REASON_RESOURCE_EXHAUSTED, true, false},
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
