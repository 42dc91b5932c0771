package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/reasons"
)

// errorDomain is the ErrorInfo domain of every error the sealer returns.
const errorDomain = "sealer.mcp"

// reasonText is the reason as the wire carries it (reasons.Text).
func reasonText(r sealerv1.Reason) string { return reasons.Text(r) }

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
var errBadRequest = reasons.ErrBadRequest

// internalFailure is the outcome of every error that is in no row of
// reasons.Table: its cause goes to the log only.
var internalFailure = reasons.Row{Err: errors.New("sealer: internal error"), Reason: sealerv1.Reason_REASON_INTERNAL}

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
// message that never quotes a secret or an internal cause, and the reason,
// as reasons.Table says.
func statusOf(err error) (error, string) {
	if _, ok := status.FromError(err); ok {
		return err, status.Code(err).String() // made by gRPC itself: a deadline, a cancellation
	}
	o, ok := reasons.Of(err)
	if !ok {
		o = internalFailure
	}
	msg, reason := o.Err.Error(), reasonText(o.Reason)
	if o.Detail {
		msg = err.Error()
	}
	code := reasons.Code(o.Reason)
	st, derr := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain})
	if derr != nil {
		return status.Error(code, msg), reason
	}
	return st.Err(), reason
}
