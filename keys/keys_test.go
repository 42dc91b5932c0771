package keys_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
)

var secret = bytes.Repeat([]byte{0xab}, keys.Size)

func TestKey_NeverPrintsMaterial(t *testing.T) {
	k, err := keys.NewKey(7, secret, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := keys.NewRing([]keys.Key{k}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %q", k, k, k, k, k, k), fmt.Sprintf("%v %+v %#v %x", r, r, r, r)} {
		if strings.Contains(s, "171 171") || strings.Contains(strings.ToLower(s), "abab") || strings.Contains(s, "\xab\xab") || strings.Contains(s, "q6ur") {
			t.Errorf("%q shows key material", s)
		}
		if !strings.Contains(s, "7") {
			t.Errorf("%q does not name the version", s)
		}
	}
}

func TestNewKey_Rejects(t *testing.T) {
	for _, tc := range []struct {
		id       uint32
		material []byte
	}{{0, secret}, {1, secret[:31]}, {1, append(secret, 0)}, {1, nil}} {
		if _, err := keys.NewKey(tc.id, tc.material, time.Time{}); !errors.Is(err, keys.ErrBadKey) {
			t.Errorf("id %d, %d bytes: got %v, want ErrBadKey", tc.id, len(tc.material), err)
		}
	}
}

func TestNewRing(t *testing.T) {
	k1, _ := keys.NewKey(1, secret, time.Time{})
	k2, _ := keys.NewKey(2, secret, time.Time{})
	r, err := keys.NewRing([]keys.Key{k2, k1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Versions(), r.SealingVersion(), r.Newest()); got != "[1 2] 1 2" {
		t.Errorf("got %s, want [1 2] 1 2", got)
	}
	if _, err := keys.NewRing([]keys.Key{k1, k1}, 1); !errors.Is(err, keys.ErrBadKey) {
		t.Errorf("duplicate version: got %v, want ErrBadKey", err)
	}
	if _, err := keys.NewRing([]keys.Key{k1}, 2); !errors.Is(err, keys.ErrNoKey) {
		t.Errorf("sealing version not held: got %v, want ErrNoKey", err)
	}
	if _, err := keys.NewRing(nil, 1); !errors.Is(err, keys.ErrNoKey) {
		t.Errorf("empty ring: got %v, want ErrNoKey", err)
	}
}

// TestRing_TenantKeysAreIndependent checks that the same master version
// yields different keys for different tenants (ARCHITECTURE invariant 5).
func TestRing_TenantKeysAreIndependent(t *testing.T) {
	k, _ := keys.NewKey(1, secret, time.Time{})
	r, _ := keys.NewRing([]keys.Key{k}, 1)
	_, a, err := r.Sealer("a")
	if err != nil {
		t.Fatal(err)
	}
	b, ok := r.Opener(1, "b")
	if !ok {
		t.Fatal("no opener for tenant b")
	}
	nonce := make([]byte, a.NonceSize())
	ct := a.Seal(nil, nonce, []byte("x"), nil)
	if _, err := b.Open(nil, nonce, ct, nil); err == nil {
		t.Fatal("tenant b opened what tenant a sealed")
	}
	a2, _ := r.Opener(1, "a")
	if _, err := a2.Open(nil, nonce, ct, nil); err != nil {
		t.Fatalf("tenant a cannot open its own: %v", err)
	}
	if _, ok := r.Opener(2, "a"); ok {
		t.Error("opener for a version not in the ring")
	}
	for _, tenant := range []string{"", strings.Repeat("t", keys.MaxTenant+1)} {
		if _, _, err := r.Sealer(tenant); !errors.Is(err, keys.ErrBadTenant) {
			t.Errorf("tenant of %d bytes: got %v, want ErrBadTenant", len(tenant), err)
		}
	}
}

func TestRing_ConcurrentDerivation(t *testing.T) {
	k, _ := keys.NewKey(1, secret, time.Time{})
	r, _ := keys.NewRing([]keys.Key{k}, 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 5000 {
				if _, _, err := r.Sealer(fmt.Sprint("tenant-", (i*5000+j)%6000)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestFile_GenerateAndLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	f := keys.File{Path: path}
	if f.Exists() {
		t.Fatal("file exists before generation")
	}
	if err := keys.GenerateFile(path, time.Now()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	r, err := f.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.SealingVersion() != 1 {
		t.Errorf("sealing version %d, want 1", r.SealingVersion())
	}
	if err := keys.GenerateFile(path, time.Now()); err == nil {
		t.Error("GenerateFile overwrote an existing file")
	}
}

// TestFile_AddVersion: a version added to a file opens at once on every
// replica that reads it and seals only once it is Activation old; a
// "sealing" pin is removed, so that activation decides.
func TestFile_AddVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	created := time.Now().Add(-time.Hour)
	if err := keys.GenerateFile(path, created); err != nil {
		t.Fatal(err)
	}
	v, err := keys.AddVersion(path, time.Now())
	if err != nil || v != 2 {
		t.Fatalf("AddVersion: %d, %v; want 2", v, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after AddVersion: %v, %v; want 0600", st.Mode().Perm(), err)
	}
	for _, tc := range []struct {
		activation time.Duration
		sealing    uint32
	}{{time.Minute, 1}, {0, 2}} {
		r, err := keys.File{Path: path, Activation: tc.activation}.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Versions()) != 2 || r.SealingVersion() != tc.sealing {
			t.Errorf("activation %v: versions %v sealing %d; want both, sealing %d", tc.activation, r.Versions(), r.SealingVersion(), tc.sealing)
		}
	}
	if _, err := keys.AddVersion(filepath.Join(t.TempDir(), "missing.json"), time.Now()); err == nil {
		t.Error("AddVersion created a missing file")
	}
}

// TestFile_RefusesAFileReadableByAnotherGroup: group-read is accepted only
// for the process's own group.
func TestFile_RefusesAFileReadableByAnotherGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := keys.GenerateFile(path, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, -1, os.Getgid()+4242); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chown to another group (CI runs as root): %v", err)
		}
		t.Skipf("cannot give the file another group: %v", err)
	}
	os.Chmod(path, 0o640)
	if _, err := (keys.File{Path: path}).Load(context.Background()); !errors.Is(err, keys.ErrFilePermissions) {
		t.Fatalf("a key file readable by another group: %v, want ErrFilePermissions", err)
	}
	os.Chmod(path, 0o600)
	if _, err := (keys.File{Path: path}).Load(context.Background()); err != nil {
		t.Fatalf("the same file readable by its owner only: %v", err)
	}
	if os.Geteuid() == 0 {
		// A file another user owns (and so may have written) is refused.
		os.Chown(path, 4242, -1)
		if _, err := (keys.File{Path: path}).Load(context.Background()); !errors.Is(err, keys.ErrFilePermissions) {
			t.Fatalf("a key file owned by another user: %v, want ErrFilePermissions", err)
		}
	}
}

// TestFile_AddVersionConcurrently: versions added at once are all kept,
// each with its own number.
func TestFile_AddVersionConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := keys.GenerateFile(path, time.Now()); err != nil {
		t.Fatal(err)
	}
	const n = 8
	got := make(chan uint32, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			v, err := keys.AddVersion(path, time.Now())
			if err != nil {
				t.Error(err)
			}
			got <- v
		})
	}
	wg.Wait()
	close(got)
	seen := map[uint32]bool{}
	for v := range got {
		seen[v] = true
	}
	r, err := keys.File{Path: path}.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n || len(r.Versions()) != n+1 {
		t.Fatalf("%d distinct versions reported, %d in the file; want %d and %d", len(seen), len(r.Versions()), n, n+1)
	}
}

func TestFile_Load(t *testing.T) {
	const k = `"q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="` // 32 bytes of 0xab
	tests := []struct {
		name, body string
		mode       os.FileMode
		sealing    uint32
		err        error
	}{
		{"sealing defaults to highest without creation times", `{"keys":[{"id":1,"key":` + k + `},{"id":3,"key":` + k + `}]}`, 0o600, 3, nil},
		{"a version younger than the activation does not seal yet", `{"keys":[{"id":1,"key":` + k + `,"created":"2020-01-01T00:00:00Z"},{"id":2,"key":` + k + `,"created":"` + time.Now().UTC().Format(time.RFC3339) + `"}]}`, 0o600, 1, nil},
		{"a version older than the activation seals", `{"keys":[{"id":1,"key":` + k + `,"created":"2020-01-01T00:00:00Z"},{"id":2,"key":` + k + `,"created":"` + time.Now().Add(-2*time.Minute).UTC().Format(time.RFC3339) + `"}]}`, 0o600, 2, nil},
		{"explicit sealing", `{"sealing":1,"keys":[{"id":1,"key":` + k + `},{"id":3,"key":` + k + `}]}`, 0o400, 1, nil},
		{"readable by its own group (a Secret mounted with the pod's fsGroup)", `{"keys":[{"id":1,"key":` + k + `}]}`, 0o440, 1, nil},
		{"writable by group", `{"keys":[{"id":1,"key":` + k + `}]}`, 0o660, 0, keys.ErrFilePermissions},
		{"readable by others", `{"keys":[{"id":1,"key":` + k + `}]}`, 0o604, 0, keys.ErrFilePermissions},
		{"no keys", `{"keys":[]}`, 0o600, 0, keys.ErrNoKey},
		{"short key", `{"keys":[{"id":1,"key":"q6ur"}]}`, 0o600, 0, keys.ErrBadKey},
		{"not base64", `{"keys":[{"id":1,"key":"!!"}]}`, 0o600, 0, keys.ErrBadKey},
		{"version 0", `{"keys":[{"id":0,"key":` + k + `}]}`, 0o600, 0, keys.ErrBadKey},
		{"unknown field", `{"keys":[{"id":1,"key":` + k + `}],"extra":1}`, 0o600, 0, keys.ErrBadKey},
		{"not JSON", `keys`, 0o600, 0, keys.ErrBadKey},
		{"sealing not held", `{"sealing":2,"keys":[{"id":1,"key":` + k + `}]}`, 0o600, 0, keys.ErrNoKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.json")
			if err := os.WriteFile(path, []byte(tc.body), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode)
			r, err := keys.File{Path: path, Activation: time.Minute}.Load(context.Background())
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if err == nil && r.SealingVersion() != tc.sealing {
				t.Fatalf("sealing %d, want %d", r.SealingVersion(), tc.sealing)
			}
			if err != nil && strings.Contains(err.Error(), "q6ur") {
				t.Fatalf("error %q quotes key material", err)
			}
		})
	}
}
