// Package secretfile reads the small files that hold credentials (a token,
// a password, a role id, a private key), the same way for every part of the
// sealer: only from a file nobody else may read (see [Private]), at most
// MaxSize bytes, without the line ending an editor or a Secret volume leaves
// at the end.
//
// A file others may read is refused, never warned about, as the key file
// is (keys.File): a credential that any local user or process could copy
// is already shared, and a warning in a start-up log is read by nobody.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// MaxSize bounds a credential file: more is refused, never read (a mistyped
// path to /dev/zero must not fill the memory).
const MaxSize = 64 << 10

// ErrPermissions means a credential file is readable or writable by others
// than its owner (and its group, when that is the process's own).
var ErrPermissions = errors.New("secretfile: a credential file must belong to this user (or root) and be accessible by nobody else (chmod 600, or 640/440 with this process's group)")

// Private reports whether fi belongs to this process's user (or root), and
// only its owner may read it, or also its group when that group is this
// process's own (a Kubernetes Secret mounted with the pod's fsGroup is 0440
// of that group); nobody else may read it, and nobody but the owner may
// write it. Outside Unix it reports true.
func Private(fi fs.FileInfo) bool { return private(fi) }

// Check refuses the file at path, with ErrPermissions, unless it is
// Private. It is for credential files another library reads (a TLS private
// key, an AppRole secret id); Read and ReadToken check by themselves. A
// symbolic link (as in a Secret volume) is judged by its target.
func Check(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return checkInfo(path, st)
}

func checkInfo(path string, st fs.FileInfo) error {
	if !Private(st) {
		return fmt.Errorf("%w: %s has mode %v", ErrPermissions, path, st.Mode().Perm())
	}
	return nil
}

// Read returns the content of the file at path, without its trailing CR and
// LF, after checking that it is Private. Its errors name the path, never
// the content.
func Read(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", err
	}
	if err := checkInfo(path, st); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxSize {
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// ReadToken is Read for a token or an id, which hold no white space: the
// content without the white space around it, refused when empty. (A
// password is read with Read: its spaces may be part of it.)
func ReadToken(path string) (string, error) {
	s, err := Read(path)
	if err != nil {
		return "", err
	}
	if s = strings.TrimSpace(s); s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
