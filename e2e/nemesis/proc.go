package nemesis

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a program run inside a node's namespace, which the nemesis can
// pause, kill and start again with the same arguments.
type Proc struct {
	Node *Node
	Addr string // the TCP address it listens on, its readiness
	argv []string
	env  []string
	log  string // stdout and stderr, appended across restarts
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProc runs argv in node's namespace (ip netns exec, which execs it:
// the process's id is the program's) and waits until addr accepts TCP
// connections. It is killed at cleanup; its output goes to logFile.
func StartProc(t testing.TB, node *Node, addr, logFile string, env []string, argv ...string) *Proc {
	t.Helper()
	p := &Proc{Node: node, Addr: addr, argv: argv, env: env, log: logFile}
	t.Cleanup(p.Kill)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Start starts the program again after Kill, and waits until it listens.
func (p *Proc) Start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.Node.NS}, p.argv...)...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = out, out
	// Killed with the test process, even one ended by its timeout, which
	// runs no cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s on %s exited before listening; see %s", p.argv[0], p.Node.Name, p.log)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("%s on %s did not listen on %s within 20s; see %s", p.argv[0], p.Node.Name, p.Addr, p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Signal sends sig (SIGSTOP, SIGCONT) to the running program.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s on %s is not running", p.argv[0], p.Node.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Kill kills the program with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Running reports whether the program has been started and not killed.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
