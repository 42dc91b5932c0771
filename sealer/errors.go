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
)

// Errors returned for malformed arguments to Seal and RequestDigest.
var (
	// ErrArgument means an argument is malformed or out of bounds.
	ErrArgument = errors.New("sealer: invalid argument")
	// ErrMethod means the MCP method may not carry a requestState (R9).
	ErrMethod = errors.New("sealer: method cannot carry a requestState")
)
