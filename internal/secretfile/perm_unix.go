//go:build unix

package secretfile

import (
	"io/fs"
	"os"
	"slices"
	"syscall"
)

func private(fi fs.FileInfo) bool {
	perm := fi.Mode().Perm()
	if !ownedWell(fi) || perm&0o040 != 0 && !ownGroup(fi) {
		return false
	}
	return perm&0o037 == 0
}

// ownedWell reports whether fi belongs to this process's user or to root:
// nobody else may have written it.
func ownedWell(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (int(st.Uid) == os.Geteuid() || st.Uid == 0)
}

// ownGroup reports whether fi's group is this process's own: its effective
// group, or one of its supplementary groups for a file root owns. The
// latter is how a Kubernetes Secret volume serves the pod's fsGroup (files
// root:fsGroup, mode 0440).
func ownGroup(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if int(st.Gid) == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	return st.Uid == 0 && err == nil && slices.Contains(groups, int(st.Gid))
}
