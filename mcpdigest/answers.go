package mcpdigest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/mcp-sealer/sealer/sealer"
)

const answersLabel = "mcp-sealer/v1 answers\x00"

// Answers returns the answers digest of a retry's inputResponses, given as
// JSON text (FORMAT.md, "Recorded outcomes", "The answers digest"): the
// SHA-256, under its own label, of the RFC 8785 form of the object with the
// member _meta of each of its members' values removed. Absent (nil or
// empty), null and {} have one digest. An open that records its outcome
// sends it, and a retry that answers otherwise than the open that consumed
// its state is refused (client.ErrOutcomeConflict) instead of getting that
// open's outcome.
//
// It refuses, wrapping sealer.ErrArgument, inputResponses that are not an
// object or null, and JSON that RFC 8785 does not canonicalize (invalid
// UTF-8, duplicate names, lone surrogates, a number beyond a double); params
// whose request digest Request computed hold none of these. Numbers are
// compared as doubles, as RFC 8785 writes them: answers that differ only
// beyond a double's precision are the same answers.
func Answers(inputResponses []byte) (sealer.Digest, error) {
	canon := []byte("{}")
	if len(inputResponses) > 0 {
		// As in Request, jcs's messages quote the input.
		c, err := jcs.Transform(inputResponses)
		switch {
		case err != nil:
			return sealer.Digest{}, fmt.Errorf("%w: inputResponses must be JSON in UTF-8 without duplicate names", sealer.ErrArgument)
		case c[0] == '{':
			if canon, err = withoutMeta(c); err != nil {
				return sealer.Digest{}, err
			}
		case string(c) != "null":
			return sealer.Digest{}, fmt.Errorf("%w: inputResponses must be an object", sealer.ErrArgument)
		}
	}
	h := sha256.New()
	h.Write([]byte(answersLabel))
	h.Write(canon)
	var d sealer.Digest
	h.Sum(d[:0])
	return d, nil
}

// withoutMeta returns canon, the RFC 8785 form of an inputResponses object,
// with the member _meta of each member's value removed, in RFC 8785 form:
// _meta is the protocol's metadata of a response, which a client may
// rewrite on a retry, not the answer.
func withoutMeta(canon []byte) ([]byte, error) {
	if !bytes.Contains(canon, []byte(`"_meta":`)) {
		return canon, nil // the common case: nothing to remove
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return nil, fmt.Errorf("%w: inputResponses must be an object", sealer.ErrArgument)
	}
	for name, v := range members {
		if v[0] != '{' {
			continue
		}
		var response map[string]json.RawMessage
		if err := json.Unmarshal(v, &response); err != nil {
			return nil, fmt.Errorf("%w: inputResponses.%s must be JSON", sealer.ErrArgument, truncate(name))
		}
		if _, ok := response["_meta"]; !ok {
			continue
		}
		delete(response, "_meta")
		out, err := json.Marshal(response)
		if err != nil {
			return nil, fmt.Errorf("%w: inputResponses.%s: %v", sealer.ErrArgument, truncate(name), err)
		}
		members[name] = out
	}
	out, err := json.Marshal(members)
	if err != nil {
		return nil, fmt.Errorf("%w: inputResponses: %v", sealer.ErrArgument, err)
	}
	// encoding/json sorts names by their bytes and escapes <, > and &: RFC
	// 8785 sorts by UTF-16 units and writes them as they are.
	if out, err = jcs.Transform(out); err != nil {
		return nil, fmt.Errorf("%w: inputResponses: not canonical", sealer.ErrArgument)
	}
	return out, nil
}
