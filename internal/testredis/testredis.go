// Package testredis runs real redis-server processes for tests.
//
// Tests that need Redis call Start. When redis-server is not installed the
// test is skipped on a developer machine and fails under CI (CI set in the
// environment): CI must never pass by skipping. The test command installs
// redis-server from Debian's packages.
package testredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server on a loopback port, persisting into its own
// directory, that a test can stop and start again on the same port and data.
type Server struct {
	Addr    string
	dir     string
	persist bool
	conf    string // a config file read first (a Sentinel's), or ""
	auth    string // the default user's password, or ""
	extra   []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Binary returns the redis-server path, or fails or skips the test.
func Binary(t testing.TB) string {
	t.Helper()
	return binaryNamed(t, "redis-server")
}

// Start runs a redis-server for the test and stops it at cleanup. With
// persist, every write is appended and fsynced (appendonly yes, appendfsync
// always) so that a restart keeps it; without, nothing is saved. extraArgs
// go to redis-server as they are; with an ACL user among them, the default
// user must stay enabled for the readiness PING.
func Start(t testing.TB, persist bool, extraArgs ...string) *Server {
	t.Helper()
	Binary(t)
	s := &Server{Addr: FreeAddr(t), dir: t.TempDir(), persist: persist, extra: slices.Clone(extraArgs)}
	s.startOnFreePorts(t)
	t.Cleanup(func() { s.Stop(t) })
	return s
}

// startOnFreePorts starts the server for the first time. A port free a
// moment ago may be taken by another process before redis-server binds it:
// then it starts again on new ports (its own and its cluster bus port).
func (s *Server) startOnFreePorts(t testing.TB) {
	t.Helper()
	for tries := 1; ; tries++ {
		err := s.start(t)
		if err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) || tries == 5 {
			t.Fatal(err)
		}
		s.Addr = FreeAddr(t)
		if i := slices.Index(s.extra, "--cluster-port"); i >= 0 && i+1 < len(s.extra) {
			_, s.extra[i+1], _ = net.SplitHostPort(FreeAddr(t))
		}
	}
}

// errAddrInUse is a start that found its port (or cluster bus port) taken.
var errAddrInUse = errors.New("address already in use")

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Restart starts the server again after Stop, on the same port and data
// directory, and waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(t); err != nil {
		t.Fatal(err)
	}
}

// start starts the server and waits until it answers; errAddrInUse when
// it could not bind its ports.
func (s *Server) start(t testing.TB) error {
	t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{"--bind", "127.0.0.1", "--port", port, "--dir", s.dir,
		"--daemonize", "no", "--protected-mode", "yes", "--logfile", ""}
	switch {
	case s.conf != "":
		// A Sentinel keeps its state in its config file, nothing else.
		args = append([]string{s.conf, "--sentinel"}, args...)
	case s.persist:
		args = append(args, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	default:
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, s.extra...)
	s.cmd = exec.Command(Binary(t), args...)
	var out bytes.Buffer
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(s.cmd, s.done)

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Password: s.auth})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			if strings.Contains(out.String(), "Address already in use") {
				return fmt.Errorf("redis-server on %s: %w: %s", s.Addr, errAddrInUse, out.String())
			}
			return fmt.Errorf("redis-server exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-s.done
			return fmt.Errorf("redis-server on %s did not answer within 10s: %v\n%s", s.Addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down (SIGTERM; with persistence it flushes the
// append-only file first) and waits for it to exit.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
	s.cmd = nil
}

// Kill stops the server at once with SIGKILL, as a crash would: nothing
// is flushed, and its replicas and clients see the connection drop.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Client is a go-redis client of the server as its default user, for a
// test's own commands (replication and failover set-up, inspection).
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Password: s.auth})
	t.Cleanup(func() { c.Close() })
	return c
}

// URL is the ledger URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// String names the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }
