// Command vault is HashiCorp Vault built from Go modules, for the sealer's
// integration tests only: scripts/test.sh builds it once into a cache
// directory and runs `vault server -dev` on loopback.
package main

import (
	"os"

	"github.com/hashicorp/vault/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
