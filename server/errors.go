package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// errorDomain is the ErrorInfo domain of every error the sealer returns.
const errorDomain = "sealer.mcp"

// reasonText is the reason as the wire carries it, in ErrorInfo.reason and
// in the metrics: the enum value's name without the prefix that buf lint
// demands (REASON_EXPIRED is "EXPIRED").
func reasonText(r sealerv1.Reason) string {
	return strings.TrimPrefix(r.String(), "REASON_")
}

// reasonOK is the outcome of a call that succeeded, in the metrics and the
// audit log only: it is no error reason, so the API's enum leaves it out.
const reasonOK = "OK"

// Reasons as text, for the code that compares or reports them so.
var (
	reasonExpired           = reasonText(sealerv1.Reason_REASON_EXPIRED)
	reasonFlowExpired       = reasonText(sealerv1.Reason_REASON_FLOW_EXPIRED)
	reasonAlreadyConsumed   = reasonText(sealerv1.Reason_REASON_ALREADY_CONSUMED)
	reasonLedgerUnavailable = reasonText(sealerv1.Reason_REASON_LEDGER_UNAVAILABLE)
	reasonInvalidArgument   = reasonText(sealerv1.Reason_REASON_INVALID_ARGUMENT)
)

// errBadRequest marks a malformed request found by the service itself.
var errBadRequest = errors.New("sealer: invalid request")

// outcome is what the caller of a failed call sees: the code, the reason,
// and whether the message may say more than err's own text.
type outcome struct {
	err    error
	code   codes.Code
	reason sealerv1.Reason
	detail bool // the error's whole text says what is wrong; it never quotes secrets
}

// outcomes map the errors of the service to what their callers see. The
// README's error table documents them, and a test holds it to this one.
var outcomes = []outcome{
	{sealer.ErrInvalid, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_STATE, false},
	{sealer.ErrExpired, codes.FailedPrecondition, sealerv1.Reason_REASON_EXPIRED, false},
	{sealer.ErrPrincipalMismatch, codes.PermissionDenied, sealerv1.Reason_REASON_PRINCIPAL_MISMATCH, false},
	{sealer.ErrRequestMismatch, codes.FailedPrecondition, sealerv1.Reason_REASON_REQUEST_MISMATCH, false},
	{sealer.ErrInputMismatch, codes.FailedPrecondition, sealerv1.Reason_REASON_INPUT_MISMATCH, false},
	{sealer.ErrFlowExpired, codes.FailedPrecondition, sealerv1.Reason_REASON_FLOW_EXPIRED, false},
	{sealer.ErrFlowExhausted, codes.FailedPrecondition, sealerv1.Reason_REASON_FLOW_EXHAUSTED, false},
	{ledger.ErrConsumed, codes.AlreadyExists, sealerv1.Reason_REASON_ALREADY_CONSUMED, false},
	{ledger.ErrUnavailable, codes.Unavailable, sealerv1.Reason_REASON_LEDGER_UNAVAILABLE, false},
	{sealer.ErrArgument, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true},
	{sealer.ErrMethod, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true},
	{errBadRequest, codes.InvalidArgument, sealerv1.Reason_REASON_INVALID_ARGUMENT, true},
	{errNoKeys, codes.Unavailable, sealerv1.Reason_REASON_KEYS_UNAVAILABLE, false},
	{errUnauthenticated, codes.Unauthenticated, sealerv1.Reason_REASON_UNAUTHENTICATED, true},
	{errExhausted, codes.ResourceExhausted, sealerv1.Reason_REASON_RESOURCE_EXHAUSTED, true},
}

// internalFailure is the outcome of every other error: its cause goes to the
// log only.
var internalFailure = outcome{errors.New("sealer: internal error"), codes.Internal, sealerv1.Reason_REASON_INTERNAL, false}

// toStatus converts an error of the service into the gRPC status its caller
// sees, with an ErrorInfo reason, and logs the cause once.
func toStatus(ctx context.Context, log *slog.Logger, tenant, method string, err error) (error, string) {
	if err == nil {
		return nil, reasonOK
	}
	st, reason := statusOf(err)
	if st == err {
		return st, reason // a status gRPC made itself (a deadline, a cancellation): nothing to log
	}
	level := slog.LevelInfo
	if c := status.Code(st); c == codes.Internal || c == codes.Unavailable {
		level = slog.LevelError
	}
	log.Log(ctx, level, "call failed", "tenant", tenant, "method", method, "reason", reason, "cause", err.Error())
	return st, reason
}

// statusOf is the only place where errors become statuses: the code, a
// message that never quotes a secret or an internal cause, and the reason.
func statusOf(err error) (error, string) {
	if _, ok := status.FromError(err); ok {
		return err, status.Code(err).String() // made by gRPC itself: a deadline, a cancellation
	}
	o := internalFailure
	for _, c := range outcomes {
		if errors.Is(err, c.err) {
			o = c
			break
		}
	}
	msg, reason := o.err.Error(), reasonText(o.reason)
	if o.detail {
		msg = err.Error()
	}
	st, derr := status.New(o.code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain})
	if derr != nil {
		return status.Error(o.code, msg), reason
	}
	return st.Err(), reason
}
