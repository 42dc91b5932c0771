//go:build unix

package keys

import (
	"os"
	"syscall"
)

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
