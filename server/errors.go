package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// errorDomain is the ErrorInfo domain of every error the sealer returns.
const errorDomain = "sealer.mcp"

// Reasons: the machine-readable outcome of a call, in ErrorInfo.reason and
// in the metrics. The README's error table documents them.
const (
	reasonOK                = "OK"
	reasonInvalidState      = "INVALID_STATE"
	reasonExpired           = "EXPIRED"
	reasonPrincipalMismatch = "PRINCIPAL_MISMATCH"
	reasonRequestMismatch   = "REQUEST_MISMATCH"
	reasonAlreadyConsumed   = "ALREADY_CONSUMED"
	reasonLedgerUnavailable = "LEDGER_UNAVAILABLE"
	reasonInvalidArgument   = "INVALID_ARGUMENT"
	reasonKeysUnavailable   = "KEYS_UNAVAILABLE"
	reasonUnauthenticated   = "UNAUTHENTICATED"
	reasonResourceExhausted = "RESOURCE_EXHAUSTED"
	reasonInternal          = "INTERNAL"
)

// errBadRequest marks a malformed request found by the service itself.
var errBadRequest = errors.New("sealer: invalid request")

var outcomes = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{sealer.ErrInvalid, codes.InvalidArgument, reasonInvalidState},
	{sealer.ErrExpired, codes.FailedPrecondition, reasonExpired},
	{sealer.ErrPrincipalMismatch, codes.PermissionDenied, reasonPrincipalMismatch},
	{sealer.ErrRequestMismatch, codes.FailedPrecondition, reasonRequestMismatch},
	{ledger.ErrConsumed, codes.AlreadyExists, reasonAlreadyConsumed},
	{ledger.ErrUnavailable, codes.Unavailable, reasonLedgerUnavailable},
	{sealer.ErrArgument, codes.InvalidArgument, reasonInvalidArgument},
	{sealer.ErrMethod, codes.InvalidArgument, reasonInvalidArgument},
	{errBadRequest, codes.InvalidArgument, reasonInvalidArgument},
	{errNoKeys, codes.Unavailable, reasonKeysUnavailable},
	{errUnauthenticated, codes.Unauthenticated, reasonUnauthenticated},
	{errExhausted, codes.ResourceExhausted, reasonResourceExhausted},
}

// toStatus converts an error of the service into the gRPC status its caller
// sees, with an ErrorInfo reason, and logs the cause once.
func toStatus(ctx context.Context, log *slog.Logger, method string, err error) (error, string) {
	if err == nil {
		return nil, reasonOK
	}
	if _, ok := status.FromError(err); ok {
		return err, status.Code(err).String() // made by gRPC itself: a deadline, a cancellation
	}
	st, reason := statusOf(err)
	level := slog.LevelInfo
	if c := status.Code(st); c == codes.Internal || c == codes.Unavailable {
		level = slog.LevelError
	}
	log.Log(ctx, level, "call failed", "method", method, "reason", reason, "cause", err.Error())
	return st, reason
}

// statusOf is the only place where errors become statuses: the code, a
// message that never quotes a secret or an internal cause, and the reason.
func statusOf(err error) (error, string) {
	if _, ok := status.FromError(err); ok {
		return err, status.Code(err).String() // made by gRPC itself: a deadline, a cancellation
	}
	code, reason, msg := codes.Internal, reasonInternal, "sealer: internal error"
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			code, reason, msg = o.code, o.reason, o.err.Error()
			if reason == reasonInvalidArgument || reason == reasonUnauthenticated || reason == reasonResourceExhausted {
				msg = err.Error() // says what is wrong; never quotes secrets
			}
			break
		}
	}
	st, derr := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain})
	if derr != nil {
		return status.Error(code, msg), reason
	}
	return st.Err(), reason
}
