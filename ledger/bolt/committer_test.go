package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// A write whose apply fails, or panics, in a group gets its own error; the
// others of the group commit without it.
func TestCommitGroup_OneFailingWriteStaysItsOwn(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bad := errors.New("bad write")
	put := func(k string) func(*bbolt.Tx) error {
		return func(tx *bbolt.Tx) error { return tx.Bucket(idsBucket).Put([]byte(k), []byte{1}) }
	}
	group := []write{
		{apply: put("a"), err: make(chan error, 1)},
		{apply: func(*bbolt.Tx) error { return bad }, err: make(chan error, 1)},
		{apply: put("b"), err: make(chan error, 1)},
		{apply: func(*bbolt.Tx) error { panic("damaged page") }, err: make(chan error, 1)},
		{apply: put("c"), err: make(chan error, 1)},
	}
	b.commitGroup(group)
	for i, want := range []error{nil, bad, nil, errors.New("panic"), nil} {
		got := <-group[i].err
		if (got == nil) != (want == nil) || want == bad && !errors.Is(got, bad) {
			t.Errorf("write %d: got %v, want %v", i, got, want)
		}
	}
	b.db.View(func(tx *bbolt.Tx) error {
		for _, k := range []string{"a", "b", "c"} {
			if tx.Bucket(idsBucket).Get([]byte(k)) == nil {
				t.Errorf("%s was not committed", k)
			}
		}
		return nil
	})
}

// Writes racing Close each end: committed (nil) or refused, never stuck;
// every one that succeeded is in the file when it is opened again.
func TestClose_WritesInFlightEndAndSucceededStay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ok := make([]bool, 500)
	for i := range ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := []byte{byte(i >> 8), byte(i)}
			ok[i] = b.commit(context.Background(), func(tx *bbolt.Tx) error { return tx.Bucket(idsBucket).Put(k, []byte{1}) }) == nil
		}()
	}
	b.Close()
	b.Close() // twice is harmless
	wg.Wait()
	b, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.db.View(func(tx *bbolt.Tx) error {
		for i, done := range ok {
			if done && tx.Bucket(idsBucket).Get([]byte{byte(i >> 8), byte(i)}) == nil {
				t.Errorf("write %d succeeded but is not in the file", i)
			}
		}
		return nil
	})
}
