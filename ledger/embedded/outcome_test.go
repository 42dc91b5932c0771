package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/ledger"
	"github.com/mcp-sealer/sealer/sealer"
)

// TestEmbedded_OutcomeValues pins the outcome state of a flow's entry,
// which replicas of other releases read: a claim names the state it was
// claimed for and a record keeps it, while a claim or an outcome an
// earlier release wrote names no state and reads as consumed for every
// one, left as it is (fail closed: a retry is refused, never answered
// with another state's outcome).
func TestEmbedded_OutcomeValues(t *testing.T) {
	l, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, until := context.Background(), time.Now().Add(time.Minute)
	e := ledger.Entry{ID: sealer.StateID{3}, Flow: sealer.FlowID{2}, Round: 5}
	k, _ := outcomeKey("t", e)
	value := func() []byte {
		t.Helper()
		v, err := l.get(k)
		if err != nil || len(v) < flowFixed {
			t.Fatalf("get: %x, %v", v, err)
		}
		return v[flowFixed:]
	}
	claimant := append([]byte{'c'}, e.ID[:]...)
	if err := l.Claim(ctx, "t", e, until, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v := value(); len(v) != len(claimant)+9 || string(v[:len(claimant)+1]) != string(claimant)+"p" {
		t.Fatalf("claimed: got %q, want %q, p and a deadline", v, claimant)
	}
	if err := l.Record(ctx, "t", e, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	if v := value(); string(v) != string(claimant)+"oanswer" {
		t.Errorf("recorded: got %q, want %q", v, string(claimant)+"oanswer")
	}

	// What an earlier release wrote.
	pending := binary.BigEndian.AppendUint64([]byte{'p'}, uint64(time.Now().Add(time.Hour).UnixMilli()))
	for _, old := range [][]byte{pending, []byte("oanswer"), []byte("n"), nil} {
		err := l.update(ctx, k, func(v []byte) ([]byte, error) { return append(v[:flowFixed:flowFixed], old...), nil })
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("outcome of an earlier release's %q: got %q, %v, want ErrConsumed", old, got, err)
		}
		if err := l.Record(ctx, "t", e, []byte("answer")); !errors.Is(err, ledger.ErrConsumed) {
			t.Errorf("record on an earlier release's %q: got %v, want ErrConsumed", old, err)
		}
		if v := value(); string(v) != string(old) {
			t.Errorf("an earlier release's %q after a record: got %q", old, v)
		}
	}
	err = l.update(ctx, k, func(v []byte) ([]byte, error) { return append(v[:flowFixed:flowFixed], "cshort"...), nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a claimant no release writes: got %v, want ErrUnavailable", err)
	}
}

// TestEmbedded_AnswersValues pins where a claim keeps its answers: 'a' and
// the 32 bytes of the digest after the fixed part and a flow's claimant,
// kept by a record. A retry with other answers, or with none, is a
// conflict, and so is one with answers of a claim an earlier release wrote
// (none kept); answers cut short are damaged.
func TestEmbedded_AnswersValues(t *testing.T) {
	l, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, until := context.Background(), time.Now().Add(time.Minute)
	ran, other := sealer.Digest{0xa1, 'p'}, sealer.Digest{0xa2}
	for _, e := range []ledger.Entry{
		{ID: sealer.StateID{1}, Answers: &ran},
		{ID: sealer.StateID{3}, Flow: sealer.FlowID{2}, Round: 5, Answers: &ran},
	} {
		k, fixed := outcomeKey("t", e)
		value := func() []byte {
			t.Helper()
			v, err := l.get(k)
			if err != nil || len(v) < fixed {
				t.Fatalf("get: %x, %v", v, err)
			}
			return v[fixed:]
		}
		set := func(v string) {
			t.Helper()
			err := l.update(ctx, k, func(old []byte) ([]byte, error) { return append(old[:fixed:fixed], v...), nil })
			if err != nil {
				t.Fatal(err)
			}
		}
		var claimant string
		if e.Round != 0 {
			claimant = "c" + string(e.ID[:])
		}
		head := claimant + "a" + string(ran[:])
		if err := l.Claim(ctx, "t", e, until, time.Minute); err != nil {
			t.Fatal(err)
		}
		if v := value(); len(v) != len(head)+9 || string(v[:len(head)+1]) != head+"p" {
			t.Fatalf("%+v claimed: got %q, want %q, p and a deadline", e, v, head)
		}
		recorder := e
		recorder.Answers = nil // Record keeps the claim's, whatever it is given
		if err := l.Record(ctx, "t", recorder, []byte("answer")); err != nil {
			t.Fatal(err)
		}
		if v := value(); string(v) != head+"oanswer" {
			t.Errorf("%+v recorded: got %q, want %q", e, v, head+"oanswer")
		}
		if got, err := l.Outcome(ctx, "t", e); err != nil || string(got) != "answer" {
			t.Errorf("%+v with its answers: got %q, %v, want answer", e, got, err)
		}
		for _, a := range []*sealer.Digest{&other, nil} {
			retry := e
			retry.Answers = a
			if got, err := l.Outcome(ctx, "t", retry); !errors.Is(err, ledger.ErrConflict) {
				t.Errorf("%+v with answers %v: got %q, %v, want ErrConflict", e, a, got, err)
			}
		}

		// What an earlier release wrote: no answers.
		set(claimant + "oanswer")
		if got, err := l.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("%+v of an earlier release's claim: got %q, %v, want ErrConflict", e, got, err)
		}
		if got, err := l.Outcome(ctx, "t", recorder); err != nil || string(got) != "answer" {
			t.Errorf("%+v without answers of an earlier release's claim: got %q, %v, want answer", e, got, err)
		}
		for _, damaged := range []string{claimant + "ashort", head} {
			set(damaged)
			if _, err := l.Outcome(ctx, "t", e); !errors.Is(err, ledger.ErrUnavailable) {
				t.Errorf("%+v holding %q: got %v, want ErrUnavailable", e, damaged, err)
			}
		}
	}
}
