package sealer

import "errors"

// Errors returned by Open. Only ErrInvalid is returned for a state that is not
// authentic; the others describe authentic states.
var (
	// ErrInvalid means the state is not an authentic state of this tenant.
	ErrInvalid = errors.New("sealer: invalid state")
	// ErrExpired means the state is authentic but past its expiry.
	ErrExpired = errors.New("sealer: state expired")
	// ErrPrincipalMismatch means the state was issued to another principal.
	ErrPrincipalMismatch = errors.New("sealer: state issued to another principal")
	// ErrRequestMismatch means the state was issued for another request.
	ErrRequestMismatch = errors.New("sealer: state issued for another request")
	// ErrFlowExpired means the state is authentic but its flow's deadline
	// has passed: no round of that request opens or continues any more.
	ErrFlowExpired = errors.New("sealer: flow expired")
	// ErrFlowExhausted means the state is authentic but its flow went past
	// the rounds allowed.
	ErrFlowExhausted = errors.New("sealer: flow has no rounds left")
	// ErrInputMismatch means the state is authentic but the retry does not
	// answer exactly the input keys the state asked.
	ErrInputMismatch = errors.New("sealer: input responses do not match the input requests")
)

// Errors returned for malformed arguments to Seal and to the request digest
// (package mcpdigest), which shares them so that one vocabulary of errors
// serves the whole API.
var (
	// ErrArgument means an argument is malformed or out of bounds.
	ErrArgument = errors.New("sealer: invalid argument")
	// ErrMethod means the MCP method may not carry a requestState (R9).
	ErrMethod = errors.New("sealer: method cannot carry a requestState")
)
