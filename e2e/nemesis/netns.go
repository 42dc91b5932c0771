package nemesis

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// prefix starts the name of every namespace, bridge and veth a run makes:
// "snm", the test process's id in hex, then the run's. A later run deletes
// what a run whose process is gone left behind (a test killed by its
// timeout runs no cleanup).
const prefix = "snm"

// Node is one network namespace on the bridge, with its own address.
type Node struct {
	Name string // what the test calls it: redis0, sealer1
	NS   string // the namespace
	IP   string
}

// Net is a bridge in the root namespace and one namespace per node, each
// joined to the bridge by a veth pair. The root namespace (the test's
// clients) reaches every node; partitions are blackhole routes inside the
// namespaces, so no firewall is needed.
type Net struct {
	Nodes  []*Node
	bridge string
	mu     sync.Mutex
	cuts   [][2]*Node // blackholes in place: in [0], the route to [1]
}

// NewNet makes a namespace for each name on a fresh bridge, on a /24
// routed nowhere else, and deletes them all at cleanup. It needs root and
// `ip`; without them the test is Missing.
func NewNet(t testing.TB, names ...string) *Net {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "ip (iproute2) is not installed")
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "network namespaces need root")
	}
	sweep(t)
	run := fmt.Sprintf("%s%x%03x", prefix, os.Getpid(), rand.IntN(1<<12))
	n := &Net{bridge: run + "g"}
	t.Cleanup(func() { n.destroy(t, run, len(names)) })
	subnet := freeSubnet(t)
	ipRun(t, "link", "add", n.bridge, "type", "bridge")
	ipRun(t, "addr", "add", subnet+".1/24", "dev", n.bridge)
	ipRun(t, "link", "set", n.bridge, "up")
	for i, name := range names {
		node := &Node{Name: name, NS: fmt.Sprintf("%s-%d", run, i), IP: fmt.Sprintf("%s.%d", subnet, 10+i)}
		host, peer := fmt.Sprintf("%sh%d", run, i), fmt.Sprintf("%sp%d", run, i)
		ipRun(t, "netns", "add", node.NS)
		ipRun(t, "link", "add", host, "type", "veth", "peer", "name", peer)
		ipRun(t, "link", "set", peer, "netns", node.NS)
		ipRun(t, "link", "set", host, "master", n.bridge, "up")
		ipRun(t, "-n", node.NS, "link", "set", peer, "name", "eth0")
		ipRun(t, "-n", node.NS, "addr", "add", node.IP+"/24", "dev", "eth0")
		ipRun(t, "-n", node.NS, "link", "set", "eth0", "up")
		ipRun(t, "-n", node.NS, "link", "set", "lo", "up")
		n.Nodes = append(n.Nodes, node)
	}
	return n
}

// freeSubnet picks 10.a.b (a /24) that no route of the root namespace
// reaches but through a gateway: no local network is shadowed.
func freeSubnet(t testing.TB) string {
	t.Helper()
	for range 50 {
		subnet := fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(256))
		out, err := exec.Command("ip", "-4", "route", "get", subnet+".1").CombinedOutput()
		// "unreachable" (no default route) or "via" (only the default
		// route's gateway): nothing local holds this /24.
		if err != nil || strings.Contains(string(out), " via ") {
			return subnet
		}
	}
	t.Fatal("no free 10.x.y.0/24 for the nemesis bridge")
	return ""
}

// sweep deletes the namespaces and bridges of runs whose test process is
// gone, and kills what still runs inside those namespaces.
func sweep(t testing.TB) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, ok := runPID(f); ok && !alive(pid) {
			killAll(f)
			exec.Command("ip", "netns", "del", f).Run()
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			name := strings.TrimSuffix(f[1], ":")
			if pid, ok := runPID(name); ok && !alive(pid) {
				exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
}

// runPID reads the test process id out of a name made by NewNet.
func runPID(name string) (int, bool) {
	if !strings.HasPrefix(name, prefix) || len(name) < len(prefix)+4 {
		return 0, false
	}
	rest := name[len(prefix):]
	end := strings.IndexAny(rest, "-ghp")
	if end < 4 {
		return 0, false
	}
	pid, err := strconv.ParseInt(rest[:end-3], 16, 32) // the last three hex digits are the run's
	return int(pid), err == nil && pid > 0
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// killAll kills the processes inside namespace ns: they were started there
// by a run of this test.
func killAll(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (n *Net) destroy(t testing.TB, run string, count int) {
	for i := range count {
		ns := fmt.Sprintf("%s-%d", run, i)
		killAll(ns)
		exec.Command("ip", "netns", "del", ns).Run()
	}
	exec.Command("ip", "link", "del", n.bridge).Run()
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), run) {
		t.Errorf("namespaces of %s left after cleanup: %s", run, out)
	}
}

// Node returns the node named name.
func (n *Net) Node(name string) *Node {
	for _, node := range n.Nodes {
		if node.Name == name {
			return node
		}
	}
	panic("nemesis: no node " + name)
}

// Cut partitions every node of a from every node of b, both ways, until
// Heal.
func (n *Net) Cut(t testing.TB, a, b []*Node) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			for _, pair := range [][2]*Node{{x, y}, {y, x}} {
				ipRun(t, "-n", pair[0].NS, "route", "add", "blackhole", pair[1].IP+"/32")
				n.cuts = append(n.cuts, pair)
			}
		}
	}
}

// Others returns every node but those of group.
func (n *Net) Others(group ...*Node) []*Node {
	var rest []*Node
	for _, node := range n.Nodes {
		if !contains(group, node) {
			rest = append(rest, node)
		}
	}
	return rest
}

func contains(nodes []*Node, node *Node) bool {
	for _, x := range nodes {
		if x == node {
			return true
		}
	}
	return false
}

// Heal removes every blackhole Cut added.
func (n *Net) Heal(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, pair := range n.cuts {
		ipRun(t, "-n", pair[0].NS, "route", "del", "blackhole", pair[1].IP+"/32")
	}
	n.cuts = nil
}

func ipRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
