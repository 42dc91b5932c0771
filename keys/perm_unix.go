//go:build unix

package keys

import (
	"io/fs"
	"os"
	"slices"
	"syscall"
)

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

// lock holds an exclusive lock on path+".lock" until the returned function
// is called, so that two `sealer keygen --add` of one file take turns.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
