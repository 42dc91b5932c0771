package bolt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger/bolt"
	"github.com/mcp-sealer/sealer/sealer"
)

// fixture is a file the ledger of an earlier release wrote
// (testdata/README.md says how).
const fixture = "testdata/ledger.db"

var (
	live    = time.Date(2100, 1, 1, 0, 0, 0, 123e6, time.UTC)
	expired = time.Date(2001, 1, 1, 0, 0, 0, 456e6, time.UTC)
)

// entry is one entry as Each gives it.
type entry struct {
	flow       bool
	key, value string
}

func (e entry) String() string {
	return fmt.Sprintf("{flow %v key %x value %x}", e.flow, e.key, e.value)
}

// key is a ledger key: the tenant, length-prefixed, then the id (its first
// byte given, the others zero).
func key(tenant string, first byte) string {
	id := sealer.StateID{first}
	return string(append(append([]byte{byte(len(tenant))}, tenant...), id[:]...))
}

func consumed(tenant string, id byte, until time.Time) entry {
	return entry{false, key(tenant, id), string(binary.BigEndian.AppendUint64(nil, uint64(until.UnixMilli())))}
}

func flow(tenant string, id byte, round uint32, until time.Time) entry {
	v := binary.BigEndian.AppendUint64(nil, uint64(until.UnixMilli()))
	return entry{true, key(tenant, id), string(binary.BigEndian.AppendUint32(v, round))}
}

// R6: every entry of the earlier release's file is read, expired or not,
// with its deadline and a flow's highest round, and the file is left as
// it was.
func TestEach_R6_ReadsEveryEntryOfAnEarlierRelease(t *testing.T) {
	before, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var got []entry
	err = bolt.Each(fixture, func(flow bool, key, value []byte) error {
		got = append(got, entry{flow, string(key), string(value)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{
		consumed("tenant-a", 1, live),
		consumed("tenant-a", 2, live),
		consumed("tenant-a", 3, live),
		consumed("tenant-a", 4, expired),
		flow("tenant-b", 8, 2, expired),
		flow("tenant-b", 9, 5, live),
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if after, err := os.ReadFile(fixture); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the file changed (%v): it must be read only", err)
	}
}

func TestEach_StopsAtPutsError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := bolt.Each(fixture, func(bool, []byte, []byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("got %v after %d calls, want put's error after 1", err, calls)
	}
}

func TestEach_MissingFileIsAnErrorAndStaysMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	if err := bolt.Each(path, func(bool, []byte, []byte) error { return nil }); err == nil {
		t.Error("got nil, want an error")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Each: stat got %v, want not exist", err)
	}
}
