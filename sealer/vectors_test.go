package sealer_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/keys"
	"github.com/mcp-sealer/sealer/sealer"
)

// vectors is testdata/vectors.json, written by gen_vectors.go.
type vectors struct {
	Keys []struct {
		ID  uint32 `json:"id"`
		Key string `json:"key"`
	} `json:"keys"`
	States []struct {
		Name, Tenant, State, Principal, Request, Now, Want string
		Payload, IssuedAt, ExpiresAt, ID                   string
		OneTime                                            bool
	} `json:"states"`
	Digests []struct {
		Method, Params, Digest string
	} `json:"digests"`
}

func loadVectors(t testing.TB) vectors {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.States) == 0 || len(v.Digests) == 0 {
		t.Fatal("no vectors")
	}
	return v
}

var verdicts = map[string]error{
	"ok":                 nil,
	"invalid":            sealer.ErrInvalid,
	"expired":            sealer.ErrExpired,
	"principal_mismatch": sealer.ErrPrincipalMismatch,
	"request_mismatch":   sealer.ErrRequestMismatch,
}

// vectorRing returns a ring of the vectors' keys.
func vectorRing(t testing.TB, v vectors) *keys.Ring {
	t.Helper()
	var ks []keys.Key
	for _, k := range v.Keys {
		material, _ := hex.DecodeString(k.Key)
		key, err := keys.NewKey(k.ID, material, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, key)
	}
	ring, err := keys.NewRing(ks, ks[0].ID())
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func TestVectors_States(t *testing.T) {
	v := loadVectors(t)
	ring := vectorRing(t, v)
	for _, tc := range v.States {
		t.Run(tc.Name, func(t *testing.T) {
			wantErr, known := verdicts[tc.Want]
			if !known {
				t.Fatalf("unknown verdict %q", tc.Want)
			}
			raw, _ := hex.DecodeString(tc.Request)
			d, err := sealer.DigestOf(raw)
			if err != nil {
				t.Fatal(err)
			}
			now, err := time.Parse(time.RFC3339Nano, tc.Now)
			if err != nil {
				t.Fatal(err)
			}
			o, err := sealer.Open(ring, tc.Tenant, tc.State, sealer.Expect{Principal: tc.Principal, Request: d, Skew: sealer.DefaultSkew}, now)
			if !errors.Is(err, wantErr) {
				t.Fatalf("got %v, want %v", err, wantErr)
			}
			if err != nil {
				return
			}
			payload, _ := base64.StdEncoding.DecodeString(tc.Payload)
			got := []string{string(o.Payload), o.IssuedAt.Format(time.RFC3339Nano), o.ExpiresAt.Format(time.RFC3339Nano), o.ID.String()}
			want := []string{string(payload), tc.IssuedAt, tc.ExpiresAt, tc.ID}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("got %q, want %q", got[i], want[i])
				}
			}
			if o.OneTime != tc.OneTime {
				t.Errorf("one-time: got %v, want %v", o.OneTime, tc.OneTime)
			}
		})
	}
}

func TestVectors_Digests(t *testing.T) {
	for i, tc := range loadVectors(t).Digests {
		d, err := sealer.RequestDigest(tc.Method, []byte(tc.Params))
		switch {
		case tc.Digest == "" && err == nil:
			t.Errorf("%d %s %s: got digest %v, want an error", i, tc.Method, tc.Params, d)
		case tc.Digest != "" && (err != nil || d.String() != tc.Digest):
			t.Errorf("%d %s %s: got %v, %v; want %s", i, tc.Method, tc.Params, d, err, tc.Digest)
		}
	}
}
