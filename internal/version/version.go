// Package version says which build of the sealer is running, from the
// build information the Go toolchain stamps into every binary.
package version

import (
	"fmt"
	"runtime/debug"
)

// Info is a build's version: the main module's version (a semantic version
// when built from a tagged module, "(devel)" otherwise), the VCS revision
// and whether the tree had local changes, and the Go version.
type Info struct {
	Version, Revision, GoVersion string
	Modified                     bool
}

// version and revision, when set at link time (go build -ldflags "-X
// github.com/mcp-sealer/sealer/internal/version.version=v1.2.0 -X
// github.com/mcp-sealer/sealer/internal/version.revision=<commit>"), win over
// the build information: an image build may have no VCS directory to stamp
// from (a git worktree, a source archive, a build context without .git).
var version, revision string

// Get returns the running binary's build information.
func Get() Info {
	info := get()
	if version != "" {
		info.Version = version
	}
	if revision != "" {
		info.Revision = revision
	}
	return info
}

func get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", Revision: "unknown", GoVersion: "unknown"}
	}
	info := Info{Version: bi.Main.Version, Revision: "unknown", GoVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	return info
}

// String reads "sealer v1.2.0 (commit 0123abc, go1.26.8)", with
// "+modified" after a commit built with local changes.
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += "+modified"
	}
	return fmt.Sprintf("sealer %s (commit %s, %s)", i.Version, rev, i.GoVersion)
}
