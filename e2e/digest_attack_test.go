package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/internal/testenv"
	"github.com/mcp-sealer/sealer/mcpdigest"
)

// transferParams is a request an MCP server may act on twice: first to ask
// for a confirmation (sealing the state), then on the retry.
const transferParams = `{"name":"transfer","arguments":{"amount":1}}`

// TestDigestAttack_CaseVariantsRefused (R5): a retry that repeats the sealed
// name and arguments but adds members named like them in another case is
// refused. The digest reads only "name" and "arguments", so the variants
// would not change it; an MCP server that binds params case-insensitively
// could act on "Arguments" instead, with a state sealed for an amount of 1.
func TestDigestAttack_CaseVariantsRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir())
	variants := []struct{ name, params string }{
		{"Arguments", `{"name":"transfer","arguments":{"amount":1},"Arguments":{"amount":100000}}`},
		{"NAME", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer_all"}`},
		{"NAME and Arguments", `{"name":"transfer","arguments":{"amount":1},"NAME":"transfer","Arguments":{"amount":100000}}`},
		{"escaped ARGUMENTS", `{"name":"transfer","arguments":{"amount":1},"ARGUMENT\u0053":{"amount":100000}}`},
		{"long s", `{"name":"transfer","arguments":{"amount":1},"argument\u017f":{"amount":100000}}`},
	}
	for name, a := range apis(t, p) {
		t.Run(name, func(t *testing.T) {
			state := mustSeal(t, a, sealBody("alice", transferParams, "confirmed: 1", `,"oneTime":true`))
			for _, v := range variants {
				t.Run("open with "+v.name, func(t *testing.T) {
					expectReason(t, a, "open", openBody(state, "alice", v.params), "INVALID_ARGUMENT")
				})
				t.Run("seal with "+v.name, func(t *testing.T) {
					expectReason(t, a, "seal", sealBody("alice", v.params, "x", ""), "INVALID_ARGUMENT")
				})
			}
			t.Run("URI on resources/read", func(t *testing.T) {
				params := `{"uri":"file:///etc/motd","URI":"file:///etc/shadow"}`
				expectReason(t, a, "seal", fmt.Sprintf(`{"principal":"alice","request":{"method":"resources/read","params":%s},"payload":""}`, params), "INVALID_ARGUMENT")
			})
			t.Run("the refused retries left the one-time state unconsumed", func(t *testing.T) {
				expectReason(t, a, "open", openBody(state, "alice", transferParams), "OK")
			})
		})
	}
}

// TestDigestAttack_DeepAndWideArgumentsRefused: arguments nested deeper than
// mcpdigest.MaxDepth or holding more than mcpdigest.MaxValues values are refused
// on both transports, and the limits themselves are accepted.
func TestDigestAttack_DeepAndWideArgumentsRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	p := start(t, t.TempDir())
	nested := func(levels int) string { // an object, then arrays
		return `{"name":"x","arguments":{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}}`
	}
	wide := func(values int) string { // an object, an array, zeros
		return `{"name":"x","arguments":{"a":[` + strings.TrimSuffix(strings.Repeat("0,", values-2), ",") + `]}}`
	}
	for name, a := range apis(t, p) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name, params, want string
			}{
				{"MaxDepth levels", nested(mcpdigest.MaxDepth), "OK"},
				{"MaxDepth+1 levels", nested(mcpdigest.MaxDepth + 1), "INVALID_ARGUMENT"},
				{"1000 levels", nested(1000), "INVALID_ARGUMENT"},
				{"MaxValues values", wide(mcpdigest.MaxValues), "OK"},
				{"MaxValues+1 values", wide(mcpdigest.MaxValues + 1), "INVALID_ARGUMENT"},
				{"150,000 values", wide(150_000), "INVALID_ARGUMENT"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					body := sealBody("alice", tc.params, "x", "")
					if len(body) > 2<<20 {
						t.Fatalf("body of %d bytes, want under 2 MiB", len(body))
					}
					expectReason(t, a, "seal", body, tc.want)
					if tc.want != "OK" {
						state := mustSeal(t, a, sealBody("alice", `{"name":"x"}`, "x", ""))
						expectReason(t, a, "open", openBody(state, "alice", tc.params), tc.want)
					}
				})
			}
		})
	}
}
