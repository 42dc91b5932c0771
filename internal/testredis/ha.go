package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// MasterName is the name the Sentinels of StartSentinel monitor.
const MasterName = "mymaster"

// adminTimeout bounds one call of the helpers to a node, so that a hung
// node fails the test instead of hanging it; a node that is down refuses at
// once. Generous: a loaded machine's Redis can be slow to answer, and a
// call that timed out would fail a test or skip a node that is fine.
const adminTimeout = 10 * time.Second

// replicationUser are the redis-server arguments that make replication use
// its own ACL user, so that cutReplication can refuse it.
var replicationUser = []string{"--user", "replication", "on", ">replication-pw", "~*", "&*", "+@all",
	"--masteruser", "replication", "--masterauth", "replication-pw"}

// Sentinel is a primary, one replica and three Sentinels monitoring them
// (quorum 2), all on loopback. The Sentinels declare the primary down after
// 1s without an answer.
type Sentinel struct {
	Primary, Replica *Server
	Sentinels        []*Server
}

// SentinelOptions configure StartSentinel.
type SentinelOptions struct {
	// Args go to both data nodes' redis-server (ACL users, for instance).
	// The default user stays open: the replica and the Sentinels use it.
	Args []string
	// Password, when set, is the Sentinels' own (requirepass), which
	// clients must give to ask them where the primary is.
	Password string
}

// StartSentinel starts a primary, its replica and three Sentinels, and
// waits until every Sentinel knows the replica and the two others (a
// failover needs both). Everything is stopped at cleanup.
func StartSentinel(t testing.TB, o SentinelOptions) *Sentinel {
	t.Helper()
	args := append(replicationUser[:len(replicationUser):len(replicationUser)], o.Args...)
	s := &Sentinel{Primary: Start(t, false, args...)}
	host, port, _ := net.SplitHostPort(s.Primary.Addr)
	s.Replica = Start(t, false, append([]string{"--replicaof", host, port}, args...)...)
	waitFor(t, 10*time.Second, "the replica's link to the primary", func() error { return linkUp(s.Replica) })
	for range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		lines := []string{
			fmt.Sprintf("sentinel monitor %s %s %s 2", MasterName, host, port),
			"sentinel down-after-milliseconds " + MasterName + " 1000",
			"sentinel failover-timeout " + MasterName + " 10000",
			"sentinel parallel-syncs " + MasterName + " 1",
		}
		if o.Password != "" {
			lines = append(lines, "requirepass "+o.Password, "sentinel sentinel-pass "+o.Password)
		}
		if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		sn := &Server{Addr: FreeAddr(t), dir: dir, conf: conf, auth: o.Password}
		sn.startOnFreePorts(t)
		t.Cleanup(func() { sn.Stop(t) })
		s.Sentinels = append(s.Sentinels, sn)
	}
	for _, sn := range s.Sentinels {
		c := sn.Client(t)
		waitFor(t, 30*time.Second, "the Sentinels to know each other and the replica", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			defer cancel()
			peers, err := c.Do(ctx, "sentinel", "sentinels", MasterName).Slice()
			if err != nil {
				return err
			}
			replicas, err := c.Do(ctx, "sentinel", "replicas", MasterName).Slice()
			if err != nil {
				return err
			}
			if len(peers) != 2 || len(replicas) != 1 {
				return fmt.Errorf("%s knows %d other Sentinels and %d replicas", sn.Addr, len(peers), len(replicas))
			}
			return nil
		})
	}
	return s
}

// Addrs are the Sentinels' addresses.
func (s *Sentinel) Addrs() []string { return addrsOf(s.Sentinels) }

// CutReplication disables the replication user on the primary and closes
// the replica's link, so that the primary's writes from now on stay in its
// backlog, as on a replica that lags, until the test ends or the primary
// dies.
func (s *Sentinel) CutReplication(t testing.TB) {
	t.Helper()
	cutReplication(t, s.Primary, s.Replica)
}

// cutReplication disables the replication user on primary and closes the
// links, and waits until every replica sees its link down.
func cutReplication(t testing.TB, primary *Server, replicas ...*Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	c := primary.Client(t)
	if err := c.Do(ctx, "acl", "setuser", "replication", "off").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "client", "kill", "user", "replication").Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		waitFor(t, 10*time.Second, "the replica's link to go down", func() error {
			if linkUp(r) == nil {
				return fmt.Errorf("%s: link still up", r.Addr)
			}
			return nil
		})
	}
}

// PrimaryAddr is where the first Sentinel says the primary is.
func (s *Sentinel) PrimaryAddr(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	hp, err := s.Sentinels[0].Client(t).Do(ctx, "sentinel", "get-master-addr-by-name", MasterName).StringSlice()
	if err != nil || len(hp) != 2 {
		t.Fatalf("sentinel get-master-addr-by-name: %v %v", hp, err)
	}
	return net.JoinHostPort(hp[0], hp[1])
}

// WaitPromoted waits until every Sentinel names the replica as the primary
// and the replica says it is one, and returns how long that took from since.
func (s *Sentinel) WaitPromoted(t testing.TB, since time.Time) time.Duration {
	t.Helper()
	waitFor(t, 60*time.Second, "the Sentinels to promote the replica", func() error {
		for _, sn := range s.Sentinels {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			hp, err := sn.Client(t).Do(ctx, "sentinel", "get-master-addr-by-name", MasterName).StringSlice()
			cancel()
			if err != nil {
				return err
			}
			if len(hp) != 2 || net.JoinHostPort(hp[0], hp[1]) != s.Replica.Addr {
				return fmt.Errorf("%s names %v", sn.Addr, hp)
			}
		}
		return role(s.Replica, "master")
	})
	return time.Since(since)
}

// Cluster is a Redis Cluster on loopback: masters with their replicas,
// node timeout 1s, created by redis-cli --cluster create.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters × (1 + replicas) cluster-enabled
// redis-servers with args (ACL users, for instance; the default user stays
// open for redis-cli and the replicas), joins them with redis-cli, and
// waits until every node sees all 16384 slots served.
func StartCluster(t testing.TB, masters, replicas int, args ...string) *Cluster {
	t.Helper()
	cli := binaryNamed(t, "redis-cli")
	c := &Cluster{}
	for range masters * (1 + replicas) {
		// The cluster bus port is picked as the node's own port is. Redis's
		// default, the node's port plus 10000, is not known to be free, and
		// there is none for a port above 55535 (Redis then refuses to start).
		_, bus, _ := net.SplitHostPort(FreeAddr(t))
		nodeArgs := append([]string{"--cluster-enabled", "yes", "--cluster-port", bus, "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"},
			replicationUser...)
		c.Nodes = append(c.Nodes, Start(t, false, append(nodeArgs, args...)...))
	}
	create := append([]string{"--cluster", "create"}, c.Addrs()...)
	create = append(create, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(t)
	for _, n := range c.Nodes {
		if role(n, "slave") == nil {
			WaitLinked(t, n)
		}
	}
	return c
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string { return addrsOf(c.Nodes) }

// FailOverAMaster kills a master with SIGKILL and returns when its replica
// has taken its slots over and the cluster serves every slot again; it
// returns when the master was killed.
func (c *Cluster) FailOverAMaster(t testing.TB) (killed time.Time) {
	t.Helper()
	victim := c.Masters(t)[0]
	replica := c.ReplicaOf(t, victim)
	killed = time.Now()
	victim.Kill(t)
	WaitRole(t, replica, "master")
	c.WaitHealthy(t)
	return killed
}

// addrsOf returns the servers' addresses.
func addrsOf(servers []*Server) []string {
	var addrs []string
	for _, n := range servers {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// WaitHealthy waits until every running node says cluster_state:ok with
// all slots served.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	waitFor(t, 60*time.Second, "the cluster to serve every slot", func() error {
		for _, n := range c.Nodes {
			if n.cmd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			info, err := n.Client(t).ClusterInfo(ctx).Result()
			cancel()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				return fmt.Errorf("%s: not ok", n.Addr)
			}

		}
		return nil
	})
}

// MasterOf returns the running node that serves key's slot, as the first
// running node sees it.
func (c *Cluster) MasterOf(t testing.TB, key string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		cl := n.Client(t)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		ranges, err := cl.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ranges {
			if int64(r.Start) <= slot && slot <= int64(r.End) {
				for _, m := range c.Nodes {
					if m.Addr == r.Nodes[0].Addr {
						return m
					}
				}
			}
		}
		t.Fatalf("no node serves slot %d", slot)
	}
	t.Fatal("no node is running")
	return nil
}

// ReplicaOf returns a running node that replicates master.
func (c *Cluster) ReplicaOf(t testing.TB, master *Server) *Server {
	t.Helper()
	_, port, _ := net.SplitHostPort(master.Addr)
	for _, n := range c.Nodes {
		if n == master || n.cmd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		info, err := n.Client(t).Info(ctx, "replication").Result()
		cancel()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+port+"\r") {
			return n
		}
	}
	t.Fatalf("no running replica of %s", master.Addr)
	return nil
}

// CutReplication cuts every master's replicas off, as CutReplication of a
// Sentinel does.
func (c *Cluster) CutReplication(t testing.TB) {
	t.Helper()
	for _, m := range c.Masters(t) {
		cutReplication(t, m, c.ReplicaOf(t, m))
	}
}

// Masters returns the running nodes whose role is master.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	var ms []*Server
	for _, n := range c.Nodes {
		if n.cmd != nil && role(n, "master") == nil {
			ms = append(ms, n)
		}
	}
	return ms
}

// WaitRole waits until the server reports role ("master" or "slave").
func WaitRole(t testing.TB, s *Server, want string) {
	t.Helper()
	waitFor(t, 60*time.Second, s.Addr+" to be "+want, func() error { return role(s, want) })
}

// replicationInfo returns s's INFO replication.
func replicationInfo(s *Server) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, Password: s.auth})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	return c.Info(ctx, "replication").Result()
}

func role(s *Server, want string) error {
	info, err := replicationInfo(s)
	if err != nil {
		return err
	}
	if !strings.Contains(info, "role:"+want+"\r") {
		return fmt.Errorf("%s: not %s", s.Addr, want)
	}
	return nil
}

func linkUp(s *Server) error {
	info, err := replicationInfo(s)
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") {
		return fmt.Errorf("%s: link not up", s.Addr)
	}
	return nil
}

// WaitLinked waits until a replica's link to its primary is up.
func WaitLinked(t testing.TB, replica *Server) {
	t.Helper()
	waitFor(t, 30*time.Second, replica.Addr+"'s link to its primary", func() error { return linkUp(replica) })
}

// waitFor polls check every 50ms until it returns nil, or fails the test
// with the last error after limit.
func waitFor(t testing.TB, limit time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %s: %v", limit, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// binaryNamed returns the path of a Redis program, or fails the test under
// CI and skips it elsewhere.
func binaryNamed(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		testenv.Missing(t, "%s is not installed", name)
	}
	return path
}
