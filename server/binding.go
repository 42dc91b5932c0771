package server

import (
	"fmt"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/mcpdigest/protostruct"
	"github.com/mcp-sealer/sealer/sealer"
)

// bindingDigest returns the digest a request binds to: the caller's own, or
// the MCP request digest of its method and params, which mcpdigest computes
// from the Struct (protostruct.Digest) with every rule of the digest. Its
// own refusals are of the binding's shape (errBadRequest); the digest's wrap
// sealer.ErrArgument or sealer.ErrMethod.
func bindingDigest(b *sealerv1.Binding) (sealer.Digest, error) {
	switch {
	case b == nil:
		return sealer.Digest{}, fmt.Errorf("%w: no request", errBadRequest)
	case len(b.Digest) > 0 && (b.Method != "" || b.Params != nil):
		return sealer.Digest{}, fmt.Errorf("%w: request has both a digest and a method or params", errBadRequest)
	case len(b.Digest) > 0:
		return sealer.DigestOf(b.Digest)
	}
	return protostruct.Digest(b.Method, b.Params)
}
