//go:build !unix

package proxy

import "net"

// smallWindowDialer: elsewhere, the receive buffer as the system sets it.
var smallWindowDialer net.Dialer
