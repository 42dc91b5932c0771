package nemesis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RedisPort is the port every Redis node listens on, in its namespace.
const RedisPort = "6379"

// NodeTimeout is the Cluster's cluster-node-timeout: a node unreachable
// this long is failed over.
const NodeTimeout = 2 * time.Second

// Cluster is a Redis Cluster, one node per namespace, persisting every
// write (appendfsync always, as docs/OPERATIONS.md asks) so that a node
// killed and restarted keeps what it acknowledged.
type Cluster struct {
	Nodes []*Proc
	cli   string
}

// StartCluster starts a cluster-enabled redis-server in each node and
// joins them with redis-cli --cluster create, a replica for each master.
func StartCluster(t testing.TB, server, cli string, nodes []*Node, dir string) *Cluster {
	t.Helper()
	c := &Cluster{cli: cli}
	var addrs []string
	for _, n := range nodes {
		d := filepath.Join(dir, n.Name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		addr := n.IP + ":" + RedisPort
		c.Nodes = append(c.Nodes, StartProc(t, n, addr, filepath.Join(d, "redis.log"), nil, server,
			"--bind", n.IP, "--port", RedisPort, "--protected-mode", "no", "--dir", d, "--daemonize", "no",
			"--save", "", "--appendonly", "yes", "--appendfsync", "always",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", fmt.Sprint(NodeTimeout.Milliseconds()), "--cluster-announce-ip", n.IP))
		addrs = append(addrs, addr)
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	return c
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, p := range c.Nodes {
		addrs = append(addrs, p.Addr)
	}
	return addrs
}

// do runs a command on node p with redis-cli, from the root namespace,
// which no partition cuts; a paused node makes it time out.
func (c *Cluster) do(p *Proc, args ...string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	host, port, _ := strings.Cut(p.Addr, ":")
	out, err := exec.CommandContext(ctx, c.cli, append([]string{"-h", host, "-p", port}, args...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("redis-cli %s on %s: %v", args[0], p.Node.Name, err)
	}
	return strings.Fields(string(out)), nil
}

// Role is one node as it describes itself (ROLE): master, or a replica
// with its master's address and whether its link is up.
type Role struct {
	Node   *Proc
	Master bool
	Of     string // a replica's master's address
	Linked bool   // a replica's link to its master is up
}

// Roles asks every running node its role; a node that does not answer is
// left out.
func (c *Cluster) Roles() []Role {
	var roles []Role
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		f, err := c.do(p, "role")
		if err != nil || len(f) == 0 {
			continue
		}
		r := Role{Node: p, Master: f[0] == "master"}
		if f[0] == "slave" && len(f) >= 4 {
			r.Of, r.Linked = f[1]+":"+f[2], f[3] == "connected"
		}
		roles = append(roles, r)
	}
	return roles
}

// Masters are the nodes that say they are masters.
func (c *Cluster) Masters() []*Proc {
	var masters []*Proc
	for _, r := range c.Roles() {
		if r.Master {
			masters = append(masters, r.Node)
		}
	}
	return masters
}

// ReplicaOf is a node that says it replicates master, or nil.
func (c *Cluster) ReplicaOf(master *Proc) *Proc {
	for _, r := range c.Roles() {
		if !r.Master && r.Of == master.Addr {
			return r.Node
		}
	}
	return nil
}

// Healthy says why the cluster is not whole, or nil: every node running
// and answering, three masters, each with a linked replica, and every node
// seeing the cluster ok.
func (c *Cluster) Healthy() error {
	roles := c.Roles()
	if len(roles) != len(c.Nodes) {
		return fmt.Errorf("%d of %d nodes answer", len(roles), len(c.Nodes))
	}
	linked := map[string]bool{}
	masters := 0
	for _, r := range roles {
		if r.Master {
			masters++
		} else if r.Linked {
			linked[r.Of] = true
		}
	}
	for _, r := range roles {
		if r.Master && !linked[r.Node.Addr] {
			return fmt.Errorf("master %s has no linked replica", r.Node.Node.Name)
		}
	}
	if masters != len(c.Nodes)/2 {
		return fmt.Errorf("%d masters", masters)
	}
	for _, p := range c.Nodes {
		f, err := c.do(p, "cluster", "info")
		if err != nil {
			return err
		}
		if len(f) == 0 || f[0] != "cluster_state:ok" {
			return fmt.Errorf("%s: cluster not ok", p.Node.Name)
		}
	}
	return nil
}

// WaitHealthy waits up to limit for Healthy, and returns its last answer.
func (c *Cluster) WaitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := c.Healthy()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
