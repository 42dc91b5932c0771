package redis_test

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcp-sealer/sealer/internal/testredis"
	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/ledger/redis"
	"github.com/mcp-sealer/sealer/sealer"
)

// aclUser is docs/OPERATIONS.md's ACL user for the ledger (password s3cret-pw):
// SET on the ledger's keys and PING; on a Cluster, CLUSTER SLOTS and
// COMMAND, which the cluster client needs to route; with --ledger-replicas,
// WAIT and DEL.
func aclUser(extra ...string) []string {
	return append([]string{"--user", "sealer", "on", ">s3cret-pw", "~sealer:v1:consumed:*", "+evalsha", "+eval", "+set", "+time", "+ping"}, extra...)
}

var clusterACL = []string{"+cluster|slots", "+command"}

// captureRedisLog collects go-redis's own messages for the test.
func captureRedisLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	goredis.SetLogger(logger{log.New(&buf, "", 0)})
	t.Cleanup(func() { goredis.SetLogger(logger{log.New(os.Stderr, "redis: ", log.LstdFlags)}) })
	return &buf
}

type logger struct{ l *log.Logger }

func (l logger) Printf(_ context.Context, format string, v ...any) { l.l.Printf(format, v...) }

// replicasTimeout is the ledger timeout of the tests with Replicas: WAIT
// gets half of it, which a loaded machine's replica needs to acknowledge a
// write (at 200ms, healthy writes were refused). Each write refused for a
// stopped replica costs that second.
const replicasTimeout = 2 * time.Second

func consume(r *redis.Ledger, i int) error {
	return r.Consume(context.Background(), "t", sealer.StateID{byte(i), byte(i >> 8)}, time.Now().Add(time.Minute))
}

// TestRedis_Sentinel_Credentials: the URL's user info is the master's ACL
// user, sentinel_password the Sentinels' own password; each is checked by
// its own server. go-redis's own parameters for the master's credentials
// are refused as ambiguous.
func TestRedis_Sentinel_Credentials(t *testing.T) {
	s := testredis.StartSentinel(t, testredis.SentinelOptions{Args: aclUser(), Password: "sentinel-pw"})
	captureRedisLog(t) // the refusals below are logged by go-redis
	addrs := s.Addrs()
	base := addrs[0] + "/0?addr=" + addrs[1] + "&addr=" + addrs[2] + "&master=" + testredis.MasterName
	r := newRedis(t, "redis+sentinel://sealer:s3cret-pw@"+base+"&sentinel_password=sentinel-pw")
	if err := consume(r, 1); err != nil {
		t.Fatalf("consume through the Sentinels: %v", err)
	}
	if err := consume(r, 1); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("again: got %v, want ErrConsumed", err)
	}
	if got, _ := s.Primary.Client(t).Exists(context.Background(), keyOf("t", 1)).Result(); got != 1 {
		t.Fatalf("the primary does not hold the consumed key")
	}
	for name, url := range map[string]string{
		"wrong master password":   "redis+sentinel://sealer:wrong@" + base + "&sentinel_password=sentinel-pw",
		"wrong Sentinel password": "redis+sentinel://sealer:s3cret-pw@" + base + "&sentinel_password=wrong",
		"no Sentinel password":    "redis+sentinel://sealer:s3cret-pw@" + base,
	} {
		if err := consume(newRedis(t, url), 2); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s: got %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := redis.New(redis.Options{URL: "redis+sentinel://" + base + "&password=s3cret-pw"}); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("password as a query parameter: got %v, want an error naming the user info, without the password", err)
	}
}

// keyOf is the ledger's key for consume(r, i) in tenant t.
func keyOf(tenant string, i int) string {
	id := sealer.StateID{byte(i), byte(i >> 8)}
	const hexdigits = "0123456789abcdef"
	var b strings.Builder
	for _, c := range id {
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	return "sealer:v1:consumed:1:" + tenant + ":" + b.String()
}

// TestRedis_Cluster_ACL: on a three-master Cluster docs/OPERATIONS.md's Cluster ACL
// is enough, with nothing logged by the client, for keys on every master;
// without CLUSTER SLOTS the client cannot route.
func TestRedis_Cluster_ACL(t *testing.T) {
	c := testredis.StartCluster(t, 3, 0, aclUser(clusterACL...)...)
	logs := captureRedisLog(t)
	r := newRedis(t, "redis+cluster://sealer:s3cret-pw@"+c.Nodes[0].Addr+"?addr="+c.Nodes[1].Addr)
	masters := map[string]bool{}
	for i := range 30 {
		if err := consume(r, i); err != nil {
			t.Fatalf("consume %d: %v", i, err)
		}
		if err := consume(r, i); !errors.Is(err, ledger.ErrConsumed) {
			t.Fatalf("consume %d again: got %v, want ErrConsumed", i, err)
		}
		masters[c.MasterOf(t, keyOf("t", i)).Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("30 keys fell on %d masters, want 3", len(masters))
	}
	if logs.Len() > 0 {
		t.Errorf("go-redis logged: %s", logs)
	}

	narrow := testredis.StartCluster(t, 3, 0, aclUser()...)
	r = newRedis(t, "redis+cluster://sealer:s3cret-pw@"+narrow.Nodes[0].Addr)
	if err := consume(r, 1); !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("without +cluster|slots: got %v, want NOPERM", err)
	}
}

// withReplica starts a primary whose ACL user sealer has the permissions
// acl, a replica linked to it, and a ledger on the primary that waits for
// that one replica (Replicas 1), closed when the test ends.
func withReplica(t *testing.T, acl ...string) (primary, replica *testredis.Server, r *redis.Ledger) {
	t.Helper()
	primary = testredis.Start(t, false, acl...)
	_, port, _ := strings.Cut(primary.Addr, ":")
	replica = testredis.Start(t, false, "--replicaof", "127.0.0.1", port)
	testredis.WaitLinked(t, replica)
	r, err := redis.New(redis.Options{URL: "redis://sealer:s3cret-pw@" + primary.Addr + "/0", Timeout: replicasTimeout, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return primary, replica, r
}

// TestRedis_Replicas_Wait: with Replicas 1 a consume returns once the
// replica holds the key; with the replica gone it is refused and its key
// deleted, so that the state can be consumed once the replica is back.
func TestRedis_Replicas_Wait(t *testing.T) {
	primary, replica, r := withReplica(t, aclUser("+wait", "+del")...)
	ctx := context.Background()
	for i := range 20 {
		if err := consume(r, i); err != nil {
			t.Fatalf("consume %d: %v", i, err)
		}
		// No sleep: WAIT returned, so the replica has it.
		if n, err := replica.Client(t).Exists(ctx, keyOf("t", i)).Result(); err != nil || n != 1 {
			t.Fatalf("consume %d returned before the replica held the key: %d %v", i, n, err)
		}
	}
	if err := consume(r, 0); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("again: got %v, want ErrConsumed", err)
	}

	replica.Stop(t)
	began := time.Now()
	if err := consume(r, 50); !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("replica stopped: got %v, want ErrUnavailable: 0 of 1 replicas", err)
	}
	t.Logf("unacknowledged consume refused after %v", time.Since(began))
	if n, _ := primary.Client(t).Exists(ctx, keyOf("t", 50)).Result(); n != 0 {
		t.Fatalf("the unacknowledged key is still on the primary")
	}
	replica.Restart(t)
	testredis.WaitLinked(t, replica)
	if err := consume(r, 50); err != nil {
		t.Fatalf("retry with the replica back: %v", err)
	}
	if err := consume(r, 50); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("again: got %v, want ErrConsumed", err)
	}
}

// TestRedis_Replicas_Outcomes: with Replicas 1, claims and records
// return once the replica holds them. With the replica gone, a claim is
// refused and undone (a flow's goes back to its round before, without
// that round's outcome), and a record is refused but stays: it is the
// outcome of a handler that ran.
func TestRedis_Replicas_Outcomes(t *testing.T) {
	primary, replica, r := withReplica(t, aclUser("~sealer:v1:flow:*", "+get", "+pttl", "+wait", "+del")...)
	ctx, until := context.Background(), time.Now().Add(time.Minute)
	flow := sealer.FlowID{9}
	acked, unacked, round1 := ledger.Entry{ID: sealer.StateID{1}}, ledger.Entry{ID: sealer.StateID{2}}, ledger.Entry{Flow: flow, Round: 1}
	for _, e := range []ledger.Entry{acked, unacked, round1} {
		if err := r.Claim(ctx, "t", e, until, time.Minute); err != nil {
			t.Fatalf("claim %+v: %v", e, err)
		}
	}
	for _, e := range []ledger.Entry{acked, round1} {
		if err := r.Record(ctx, "t", e, []byte("answer")); err != nil {
			t.Fatalf("record %+v: %v", e, err)
		}
	}
	if v, err := replica.Client(t).Get(ctx, keyOf("t", 1)).Result(); err != nil || v != "1oanswer" {
		t.Fatalf("the replica holds %q, %v; want the record, 1oanswer", v, err)
	}

	replica.Stop(t)
	if err := r.Record(ctx, "t", unacked, []byte("answer")); !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Fatalf("record, replica stopped: got %v, want ErrUnavailable: 0 of 1 replicas", err)
	}
	if got, err := r.Outcome(ctx, "t", unacked); err != nil || string(got) != "answer" {
		t.Fatalf("outcome of the unacknowledged record: got %q, %v; want it kept", got, err)
	}
	if err := r.Claim(ctx, "t", ledger.Entry{ID: sealer.StateID{3}}, until, time.Minute); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("claim of a state, replica stopped: got %v, want ErrUnavailable", err)
	}
	if n, _ := primary.Client(t).Exists(ctx, keyOf("t", 3)).Result(); n != 0 {
		t.Fatalf("the unacknowledged claim's key is still on the primary")
	}
	round2 := ledger.Entry{Flow: flow, Round: 2}
	if err := r.Claim(ctx, "t", round2, until, time.Minute); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("claim of round 2, replica stopped: got %v, want ErrUnavailable", err)
	}
	if _, err := r.Outcome(ctx, "t", round2); !errors.Is(err, ledger.ErrGone) {
		t.Fatalf("round 2 after its claim was undone: got %v, want ErrGone", err)
	}
	if _, err := r.Outcome(ctx, "t", round1); !errors.Is(err, ledger.ErrConsumed) {
		t.Fatalf("round 1 after the undo: got %v, want ErrConsumed (its outcome went with the advance)", err)
	}

	replica.Restart(t)
	testredis.WaitLinked(t, replica)
	if err := r.Claim(ctx, "t", round2, until, time.Minute); err != nil {
		t.Fatalf("claim of round 2 with the replica back: %v", err)
	}
}

// TestRedis_Cluster_WaitOnTheKeysMaster: on a Cluster, WAIT goes to the
// master that took the SET: with one master's replica stopped, consumes of
// keys on that master are refused and the others are not.
func TestRedis_Cluster_WaitOnTheKeysMaster(t *testing.T) {
	c := testredis.StartCluster(t, 3, 1, aclUser(append(clusterACL, "+wait", "+del")...)...)
	r, err := redis.New(redis.Options{URL: "redis+cluster://sealer:s3cret-pw@" + c.Nodes[0].Addr, Timeout: replicasTimeout, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lonely := c.MasterOf(t, keyOf("t", 0))
	c.ReplicaOf(t, lonely).Stop(t)
	refused, accepted := 0, 0
	for i := range 30 {
		err := consume(r, i)
		onLonely := c.MasterOf(t, keyOf("t", i)) == lonely
		switch {
		case onLonely && errors.Is(err, ledger.ErrUnavailable):
			refused++
		case !onLonely && err == nil:
			accepted++
		default:
			t.Fatalf("key %d (on the master without replica: %v): %v", i, onLonely, err)
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("%d refused, %d accepted: want some of each", refused, accepted)
	}
	t.Logf("%d consumes on the master without replica refused, %d on the others accepted", refused, accepted)
}

// TestRedis_PasswordFile_ReadAgain: the password file is read again for a
// new connection, after a rotation (old connections closed) and after a
// denial (WRONGPASS), without a new ledger.
func TestRedis_PasswordFile_ReadAgain(t *testing.T) {
	srv := testredis.Start(t, false, aclUser()...)
	file := filepath.Join(t.TempDir(), "redis-pw")
	write := func(pw string) {
		if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("s3cret-pw")
	r, err := redis.New(redis.Options{URL: "redis://sealer@" + srv.Addr + "/0", PasswordFile: file, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := consume(r, 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := srv.Client(t)
	// Rotation: the server takes the new password only, the file follows,
	// the old connections are closed.
	if err := admin.Do(ctx, "acl", "setuser", "sealer", "resetpass", ">n3w-pw").Err(); err != nil {
		t.Fatal(err)
	}
	write("n3w-pw")
	admin.Do(ctx, "client", "kill", "user", "sealer")
	if err := eventually(func() error { return consume(r, 2) }); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	// Denial: the server changes first; the file follows later.
	admin.Do(ctx, "acl", "setuser", "sealer", "resetpass", ">third-pw")
	admin.Do(ctx, "client", "kill", "user", "sealer")
	err = eventually(func() error { return consume(r, 3) })
	if !errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("file not yet rotated: got %v, want WRONGPASS", err)
	}
	write("third-pw")
	if err := consume(r, 3); err != nil {
		t.Fatalf("after the file follows the denial: %v", err)
	}
}

// eventually returns nil once call does within three tries (a connection
// closed by the server fails one call), else call's last error.
func eventually(call func() error) error {
	var err error
	for range 3 {
		if err = call(); err == nil {
			return nil
		}
	}
	return err
}
