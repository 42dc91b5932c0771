package version

import (
	"strings"
	"testing"
)

// A version and commit linked in (-ldflags -X) win over the build
// information.
func TestLinkedIn(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	got := Get()
	if got.Version != "v1.2.3" || got.Revision != revision {
		t.Fatalf("Get() = %+v, want the linked-in version and revision", got)
	}
	if s := got.String(); !strings.HasPrefix(s, "sealer v1.2.3 (commit 0123456789ab") {
		t.Errorf("String() = %q", s)
	}
}
