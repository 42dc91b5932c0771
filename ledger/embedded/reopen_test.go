package embedded

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/sealer"
)

// TestEmbedded_AFailureAsAReopenEndsIsReopenedToo is issue 40's eleventh
// finding: a commit that failed after a reopen healed the ledger and
// before its loop ended found the loop still running, started none, and
// left the ledger broken until a restart. It must heal again by itself.
func TestEmbedded_AFailureAsAReopenEndsIsReopenedToo(t *testing.T) {
	l, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var once sync.Once
	hook := func() { once.Do(func() { l.fail(errors.New("a second failure")) }) }
	testHookReopened.Store(&hook)
	t.Cleanup(func() { testHookReopened.Store(nil) })

	l.fail(errors.New("a first failure"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := l.Consume(context.Background(), "t", sealer.StateID{byte(time.Now().UnixNano())}, time.Now().Add(time.Hour))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after a failure that came as a reopen ended: consume %v, want the ledger healed", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
