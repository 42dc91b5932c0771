// Package netaddr holds what the binaries check of their listen addresses.
package netaddr

import "net"

// IsLoopback reports whether a listen address (host:port) binds loopback
// only: localhost, 127.0.0.0/8 or ::1.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
