// Package client is the Go client of the sealer: Seal and Open over gRPC,
// with the sealer's error reasons mapped back to Go sentinel errors, and the
// request digest computed in process, so that an MCP server protects its
// requestState in a few lines per handler:
//
//	opened, err := sc.Open(ctx, client.OpenRequest{State: state, Principal: who,
//		Request: client.ToolCall(params.Name, params.Arguments)})
//	if client.Rejected(err) {
//		// answer the MCP client with JSON-RPC invalid params (-32602)
//	}
//
// It links no MCP SDK and nothing of the service's storage: the adapter for
// the official MCP Go SDK (bindings from its request types, its JSON-RPC
// error) is the module client/gosdk.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// Errors of the sealer service. Where the core or the ledger has a sentinel
// for a reason (sealer.ErrInvalid, sealer.ErrExpired,
// sealer.ErrPrincipalMismatch, sealer.ErrRequestMismatch, sealer.ErrArgument,
// ledger.ErrConsumed, ledger.ErrUnavailable), the error matches it, so that
// errors.Is reads the same in process and over the network; these are for
// the others.
var (
	// ErrInvalidArgument means the sealer refused the request as malformed.
	// It is sealer.ErrArgument, which the core returns for the same.
	ErrInvalidArgument = sealer.ErrArgument
	// ErrUnauthenticated means the sealer did not accept the credentials.
	ErrUnauthenticated = errors.New("sealer: unauthenticated")
	// ErrResourceExhausted means a tenant limit was hit; retry later.
	ErrResourceExhausted = errors.New("sealer: tenant limit exceeded")
	// ErrKeysUnavailable means the sealer has no keys loaded yet; retry.
	ErrKeysUnavailable = errors.New("sealer: no keys loaded yet")
)

// reasons map the sealer's error reasons to sentinels. REASON_INTERNAL has
// none: the sealer failed, and the error only wraps the status.
var reasons = map[sealerv1.Reason]error{
	sealerv1.Reason_REASON_INVALID_STATE:      sealer.ErrInvalid,
	sealerv1.Reason_REASON_EXPIRED:            sealer.ErrExpired,
	sealerv1.Reason_REASON_PRINCIPAL_MISMATCH: sealer.ErrPrincipalMismatch,
	sealerv1.Reason_REASON_REQUEST_MISMATCH:   sealer.ErrRequestMismatch,
	sealerv1.Reason_REASON_ALREADY_CONSUMED:   ledger.ErrConsumed,
	sealerv1.Reason_REASON_LEDGER_UNAVAILABLE: ledger.ErrUnavailable,
	sealerv1.Reason_REASON_INVALID_ARGUMENT:   ErrInvalidArgument,
	sealerv1.Reason_REASON_UNAUTHENTICATED:    ErrUnauthenticated,
	sealerv1.Reason_REASON_RESOURCE_EXHAUSTED: ErrResourceExhausted,
	sealerv1.Reason_REASON_KEYS_UNAVAILABLE:   ErrKeysUnavailable,
}

// Rejected reports whether err means the state must be refused to the MCP
// client: not authentic, expired, another principal's, another request's, or
// already consumed. Other errors are the sealer's or the network's; the MCP
// server should report them as its own failure.
func Rejected(err error) bool {
	for _, e := range []error{sealer.ErrInvalid, sealer.ErrExpired, sealer.ErrPrincipalMismatch, sealer.ErrRequestMismatch, ledger.ErrConsumed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Client calls a sealer over gRPC. It is safe for concurrent use.
type Client struct {
	rpc  sealerv1.SealerClient
	conn *grpc.ClientConn
}

// New returns a client over an existing connection (with whatever TLS and
// per-call credentials it carries).
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: sealerv1.NewSealerClient(conn)}
}

// Dial connects to the sealer at target.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("sealer client: %v", err)
	}
	return &Client{rpc: sealerv1.NewSealerClient(conn), conn: conn}, nil
}

// Close closes a connection made by Dial.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Binding names the request a state belongs to.
type Binding struct {
	// Method and Params, the MCP request's params as received (only name,
	// arguments and uri count); or Digest, 32 bytes of the caller's own.
	Method string
	Params map[string]any
	Digest []byte
}

// ToolCall binds to a tools/call request: its tool name and its arguments
// as received (JSON text; nil or empty when absent).
func ToolCall(name string, arguments json.RawMessage) Binding {
	params := map[string]any{"name": name}
	if len(arguments) > 0 {
		params["arguments"] = arguments // as received; canonicalized by the digest
	}
	return Binding{Method: "tools/call", Params: params}
}

// PromptGet binds to a prompts/get request: its prompt name and arguments
// (nil when absent).
func PromptGet(name string, arguments map[string]string) Binding {
	params := map[string]any{"name": name}
	if arguments != nil {
		args := make(map[string]any, len(arguments))
		for k, v := range arguments {
			args[k] = v
		}
		params["arguments"] = args
	}
	return Binding{Method: "prompts/get", Params: params}
}

// ResourceRead binds to a resources/read request: its uri.
func ResourceRead(uri string) Binding {
	return Binding{Method: "resources/read", Params: map[string]any{"uri": uri}}
}

// proto sends the binding as its digest, computed here by the code the sealer
// runs on params (sealer.RequestDigest): 32 bytes on the wire instead of the
// params, twice per round trip, and no Struct to encode or decode on either
// side. Other languages send params and let the sealer digest them; the
// digests are the same (FORMAT.md, "Request digest").
func (b Binding) proto() (*sealerv1.Binding, error) {
	if b.Digest != nil {
		return &sealerv1.Binding{Digest: b.Digest}, nil
	}
	d, err := b.RequestDigest()
	switch {
	case errors.Is(err, ErrInvalidArgument):
		return nil, err // the core's message already says so
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return &sealerv1.Binding{Digest: d[:]}, nil
}

// RequestDigest returns the digest the sealer binds the request to,
// computed in process as the sealer does (sealer.RequestDigest): only the
// salient members, canonicalized, after refusing members named like them in
// another case (sealer.CheckParamName).
func (b Binding) RequestDigest() (sealer.Digest, error) {
	names := sealer.SalientParams(b.Method)
	if names == nil {
		return sealer.DigestCanonical(b.Method, "", nil) // ErrMethod
	}
	for name := range b.Params {
		if err := sealer.CheckParamName(b.Method, name); err != nil {
			return sealer.Digest{}, err
		}
	}
	target, _ := b.Params[names[0]].(string)
	var args []byte
	if len(names) == 2 {
		if v, ok := b.Params[names[1]]; ok {
			raw, err := json.Marshal(v)
			if err != nil {
				return sealer.Digest{}, fmt.Errorf("params.%s: %v", names[1], err)
			}
			// jcs refuses duplicate names, invalid UTF-8 and lone surrogates;
			// its messages quote the input, so they are not passed on.
			if args, err = jcs.Transform(raw); err != nil {
				return sealer.Digest{}, fmt.Errorf("params.%s is not JSON in UTF-8 without duplicate names", names[1])
			}
		}
	}
	return sealer.DigestCanonical(b.Method, target, args)
}

// SealRequest is what Seal binds and carries.
type SealRequest struct {
	Principal string
	Request   Binding
	Payload   []byte
	// TTL is the state's life; zero means the sealer's default.
	TTL time.Duration
	// OneTime makes the state open at most once.
	OneTime bool
}

// Seal returns a new requestState and its expiry.
func (c *Client) Seal(ctx context.Context, r SealRequest) (string, time.Time, error) {
	b, err := r.Request.proto()
	if err != nil {
		return "", time.Time{}, err
	}
	req := &sealerv1.SealRequest{Principal: r.Principal, Request: b, Payload: r.Payload, OneTime: r.OneTime}
	if r.TTL != 0 {
		req.Ttl = durationpb.New(r.TTL)
	}
	resp, err := c.rpc.Seal(ctx, req)
	if err != nil {
		return "", time.Time{}, fromStatus(err)
	}
	return resp.GetRequestState(), resp.GetExpiresAt().AsTime(), nil
}

// OpenRequest presents a state from a retry.
type OpenRequest struct {
	State     string
	Principal string
	Request   Binding
}

// Opened is what an open returns.
type Opened struct {
	Payload             []byte
	IssuedAt, ExpiresAt time.Time
}

// Open checks a state against the retry presenting it and returns what was
// sealed. A refused state is an error for which Rejected is true.
func (c *Client) Open(ctx context.Context, r OpenRequest) (*Opened, error) {
	b, err := r.Request.proto()
	if err != nil {
		return nil, err
	}
	resp, err := c.rpc.Open(ctx, &sealerv1.OpenRequest{RequestState: r.State, Principal: r.Principal, Request: b})
	if err != nil {
		return nil, fromStatus(err)
	}
	return &Opened{Payload: resp.GetPayload(), IssuedAt: resp.GetIssuedAt().AsTime(), ExpiresAt: resp.GetExpiresAt().AsTime()}, nil
}

// fromStatus maps a status with an ErrorInfo reason to its sentinel, keeping
// the status and its message.
func fromStatus(err error) error {
	st := status.Convert(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if sentinel, ok := reasons[parseReason(info.Reason)]; ok {
				return &reasonError{sentinel: sentinel, status: st}
			}
		}
	}
	return fmt.Errorf("sealer: %w", err)
}

// parseReason reads an ErrorInfo reason as the sealer sends it: the name of
// a Reason without its REASON_ prefix. Anything else is REASON_UNSPECIFIED.
func parseReason(s string) sealerv1.Reason {
	return sealerv1.Reason(sealerv1.Reason_value["REASON_"+s])
}

// reasonError is a sealer error: errors.Is matches its sentinel, and
// status.FromError still finds the gRPC status.
type reasonError struct {
	sentinel error
	status   *status.Status
}

// Error is the sentinel's text, then what the sealer's message adds to it,
// said once: "sealer: invalid argument: invalid request: empty principal"
// for the message "sealer: invalid request: empty principal".
func (e *reasonError) Error() string {
	s, msg := e.sentinel.Error(), e.status.Message()
	switch {
	case msg == s || strings.HasPrefix(msg, s+": "):
		return msg
	case msg == "":
		return s
	}
	if pkg, _, ok := strings.Cut(s, ": "); ok {
		msg = strings.TrimPrefix(msg, pkg+": ") // "sealer: invalid request: ..."
	}
	return s + ": " + msg
}

func (e *reasonError) Unwrap() error              { return e.sentinel }
func (e *reasonError) GRPCStatus() *status.Status { return e.status }
