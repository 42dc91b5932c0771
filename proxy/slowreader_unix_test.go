//go:build unix

package proxy

import (
	"net"
	"syscall"
)

// smallWindowDialer dials with a receive buffer of 4 KiB, set before the
// connection opens so that the window it offers stays that small: the
// proxy cannot hand an answer to the kernel past what the client reads.
var smallWindowDialer = net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	return err
}}
