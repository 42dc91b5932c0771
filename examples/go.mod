module github.com/mcp-sealer/sealer/examples

go 1.26.8

// The npm packages (typescript/node_modules) hold no Go, and the test
// command's npm ci replaces them while go walks ./... beside it.
ignore node_modules

require (
	github.com/google/jsonschema-go v0.4.3
	github.com/mcp-sealer/sealer v0.0.0
	github.com/mcp-sealer/sealer/client/gosdk v0.0.0
	github.com/modelcontextprotocol/go-sdk v1.8.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/gowebpki/jcs v1.0.2 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/mcp-sealer/sealer => ..
	github.com/mcp-sealer/sealer/client/gosdk => ../client/gosdk
)
