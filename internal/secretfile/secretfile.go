// Package secretfile reads the small files that hold credentials (a token,
// a password, a role id), the same way for every part of the sealer: at
// most MaxSize bytes, without the line ending an editor or a Secret volume
// leaves at the end.
package secretfile

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSize bounds a credential file: more is refused, never read (a mistyped
// path to /dev/zero must not fill the memory).
const MaxSize = 64 << 10

// Read returns the content of the file at path, without its trailing CR and
// LF. Its errors name the path, never the content.
func Read(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxSize+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxSize {
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
