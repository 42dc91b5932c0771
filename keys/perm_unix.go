//go:build unix

package keys

import (
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// ownGroup reports whether fi's group is one of this process's groups: the
// pod's fsGroup, which a Kubernetes Secret volume makes its files readable
// by (mode 0440).
func ownGroup(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if int(st.Gid) == os.Getgid() {
		return true
	}
	groups, err := os.Getgroups()
	return err == nil && slices.Contains(groups, int(st.Gid))
}
