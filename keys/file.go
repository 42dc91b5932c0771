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

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

// maxFileSize bounds how much of a key file is read.
const maxFileSize = 1 << 20

// ErrFilePermissions means a key file is readable or writable by others
// than its owner (and its group, when that is the process's own).
var ErrFilePermissions = errors.New("keys: key file must belong to this user (or root) and be accessible by nobody else (chmod 600)")

// File is a key source backed by a local JSON key file, the embedded
// default. The file looks like this (keys base64, standard alphabet):
//
//	{"sealing": 2, "keys": [
//	  {"id": 1, "key": "...", "created": "2026-11-29T19:00:00Z"},
//	  {"id": 2, "key": "...", "created": "2026-11-30T19:00:00Z"}]}
//
// Every listed version may open. "sealing", when present, names the one
// that seals; without it the newest version created at least Activation ago
// seals (see Activated), so that every replica reading the same file holds a
// new version before the first state sealed with it reaches them. A version
// without "created" counts as old. Retire a version by deleting its entry.
type File struct {
	Path       string
	Activation time.Duration
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
	doc, err := readFileJSON(f.Path)
	if err != nil {
		return nil, err
	}
	defer clear(doc.Keys)
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
	if doc.Sealing == 0 {
		return Activated(versions, time.Now(), f.Activation)
	}
	return NewRing(versions, doc.Sealing)
}

// GenerateFile writes a new key file at path holding one fresh random
// version, readable by its owner only. It never overwrites an existing file.
func GenerateFile(path string, now time.Time) error {
	doc := fileJSON{Keys: []fileKeyJSON{newFileKey(1, now)}}
	defer clear(doc.Keys)
	return writeFile(path, doc)
}

// AddVersion adds a fresh random version to the key file at path, created
// now, and removes a "sealing" pin, so that the new version seals once it
// is Activation old on every replica that reads the file. It replaces the
// file atomically and returns the new version.
func AddVersion(path string, now time.Time) (uint32, error) {
	unlock, err := lock(path)
	if err != nil {
		return 0, fmt.Errorf("keys: %v", err)
	}
	defer unlock()
	doc, err := readFileJSON(path)
	if err != nil {
		return 0, err
	}
	defer clear(doc.Keys)
	id := uint32(0)
	for _, k := range doc.Keys {
		id = max(id, k.ID)
	}
	doc.Sealing = 0
	doc.Keys = append(doc.Keys, newFileKey(id+1, now))
	tmp := path + ".new" // under the lock, no other run writes it
	os.Remove(tmp)       // a leftover of a failed run; O_EXCL then sets the mode
	if err := writeFile(tmp, doc); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("keys: %v", err)
	}
	return id + 1, nil
}

func newFileKey(id uint32, now time.Time) fileKeyJSON {
	material := make([]byte, Size)
	defer clear(material)
	rand.Read(material)
	return fileKeyJSON{ID: id, Key: base64.StdEncoding.EncodeToString(material), Created: now.UTC().Truncate(time.Second)}
}

// readFileJSON reads a key file's document, with the checks Load makes.
func readFileJSON(path string) (fileJSON, error) {
	var doc fileJSON
	fh, err := os.Open(path)
	if err != nil {
		return doc, fmt.Errorf("keys: %v", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return doc, fmt.Errorf("keys: %v", err)
	}
	if !secretfile.Private(st) { // the rule of every credential file
		return doc, fmt.Errorf("%w: %s has mode %v", ErrFilePermissions, path, st.Mode().Perm())
	}
	if st.Size() > maxFileSize {
		return doc, fmt.Errorf("%w: %s is larger than %d bytes", ErrBadKey, path, maxFileSize)
	}
	dec := json.NewDecoder(fh)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		// The decoder's message may quote the file; say only where it failed.
		return doc, fmt.Errorf("%w: %s is not a valid key file", ErrBadKey, path)
	}
	if len(doc.Keys) == 0 {
		return doc, fmt.Errorf("%w: %s holds no keys", ErrNoKey, path)
	}
	return doc, nil
}

// writeFile writes doc in a new file at path, readable by its owner only.
func writeFile(path string, doc fileJSON) error {
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("keys: %v", err)
	}
	defer clear(data)
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
