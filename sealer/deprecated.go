package sealer

// Limits of the request digest, which package mcpdigest defines and
// enforces; a test holds these equal to its own.
const (
	// Deprecated: use mcpdigest.MaxDepth.
	MaxDepth = 64
	// Deprecated: use mcpdigest.MaxValues.
	MaxValues = 100_000
)
