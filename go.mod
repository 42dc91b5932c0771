module github.com/mcp-sealer/sealer

go 1.26.8

require (
	github.com/gowebpki/jcs v1.0.2
	golang.org/x/crypto v0.59.0
)

require golang.org/x/sys v0.50.0 // indirect
