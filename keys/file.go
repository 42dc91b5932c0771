package keys

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// maxFileSize bounds how much of a key file is read.
const maxFileSize = 1 << 20

// ErrFilePermissions means a key file is readable or writable by others
// than its owner.
var ErrFilePermissions = errors.New("keys: key file must not be accessible by group or others (chmod 600)")

// File is a key source backed by a local JSON key file, the embedded
// default. The file looks like this (keys base64, standard alphabet):
//
//	{"sealing": 2, "keys": [
//	  {"id": 1, "key": "...", "created": "2026-11-29T19:00:00Z"},
//	  {"id": 2, "key": "...", "created": "2026-11-30T19:00:00Z"}]}
//
// Every listed version may open; "sealing" names the one that seals, and
// defaults to the highest. Retire a version by deleting its entry.
type File struct {
	Path string
}

type fileJSON struct {
	Sealing uint32        `json:"sealing,omitempty"`
	Keys    []fileKeyJSON `json:"keys"`
}

type fileKeyJSON struct {
	ID      uint32    `json:"id"`
	Key     string    `json:"key"`
	Created time.Time `json:"created,omitzero"`
}

var _ Source = File{}

// Load reads the file and returns its ring. It refuses a file that group or
// others may access.
func (f File) Load(context.Context) (*Ring, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, fmt.Errorf("keys: %v", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("keys: %v", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v", ErrFilePermissions, f.Path, st.Mode().Perm())
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrBadKey, f.Path, maxFileSize)
	}
	var doc fileJSON
	dec := json.NewDecoder(fh)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		// The decoder's message may quote the file; say only where it failed.
		return nil, fmt.Errorf("%w: %s is not a valid key file", ErrBadKey, f.Path)
	}
	if len(doc.Keys) == 0 {
		return nil, fmt.Errorf("%w: %s holds no keys", ErrNoKey, f.Path)
	}
	versions := make([]Key, 0, len(doc.Keys))
	for _, e := range doc.Keys {
		material, err := base64.StdEncoding.DecodeString(e.Key)
		if err != nil {
			return nil, fmt.Errorf("%w: version %d in %s is not base64", ErrBadKey, e.ID, f.Path)
		}
		k, err := NewKey(e.ID, material, e.Created)
		clear(material)
		if err != nil {
			return nil, err
		}
		versions = append(versions, k)
	}
	sealing := doc.Sealing
	if sealing == 0 {
		for _, k := range versions {
			sealing = max(sealing, k.id)
		}
	}
	return NewRing(versions, sealing)
}

// GenerateFile writes a new key file at path holding one fresh random
// version, readable by its owner only. It never overwrites an existing file.
func GenerateFile(path string, now time.Time) error {
	material := make([]byte, Size)
	defer clear(material)
	rand.Read(material)
	doc := fileJSON{Sealing: 1, Keys: []fileKeyJSON{{
		ID: 1, Key: base64.StdEncoding.EncodeToString(material), Created: now.UTC().Truncate(time.Second),
	}}}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("keys: %v", err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("keys: %v", err)
	}
	_, werr := fh.Write(append(data, '\n'))
	if err := errors.Join(werr, fh.Sync(), fh.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("keys: write %s: %v", path, err)
	}
	return nil
}

// Exists reports whether a key file is present at path.
func (f File) Exists() bool {
	_, err := os.Stat(f.Path)
	return !errors.Is(err, fs.ErrNotExist)
}
