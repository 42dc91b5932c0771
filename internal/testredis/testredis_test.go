package testredis

import (
	"net"
	"testing"
)

// A port taken between FreeAddr and redis-server's bind is no failure: the
// server starts on another.
func TestStart_APortTakenMeanwhileIsReplaced(t *testing.T) {
	Binary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Server{Addr: l.Addr().String(), dir: t.TempDir()}
	s.startOnFreePorts(t)
	t.Cleanup(func() { s.Stop(t) })
	if s.Addr == l.Addr().String() {
		t.Fatalf("started on %s, the port taken", s.Addr)
	}
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the server on %s does not answer: %v", s.Addr, err)
	}
}
