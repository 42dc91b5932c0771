package secretfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sealer/sealer/internal/secretfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		body, want string
		err        bool
	}{
		"line ending removed":    {body: "s3cret \r\n", want: "s3cret "},
		"no line ending":         {body: "token", want: "token"},
		"at the limit":           {body: strings.Repeat("x", secretfile.MaxSize), want: strings.Repeat("x", secretfile.MaxSize)},
		"past the limit":         {body: strings.Repeat("x", secretfile.MaxSize+1), err: true},
		"missing file (no body)": {err: true},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if tc.body != "" {
				os.WriteFile(path, []byte(tc.body), 0o600)
			}
			got, err := secretfile.Read(path)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("got %d bytes, %v; want %d bytes, error %v", len(got), err, len(tc.want), tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "xxxx") {
				t.Fatal("the error quotes the content")
			}
		})
	}
}

// TestRead_RefusesFilesOthersMayRead: a credential file is held to the key
// file's rule (keys.File): this user's (or root's), readable by its owner
// and, when the group is this process's own (a Kubernetes Secret mounted
// with the pod's fsGroup, 0440), by its group; nobody else reads it and
// nobody but its owner writes it. Before, a file at 0644 passed unnoticed.
func TestRead_RefusesFilesOthersMayRead(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		ok   bool
	}{
		{"owner only", 0o600, true},
		{"owner read only", 0o400, true},
		{"own group may read", 0o640, true},
		{"own group read only (fsGroup Secret)", 0o440, true},
		{"readable by all", 0o644, false},
		{"readable by others", 0o604, false},
		{"writable by group", 0o660, false},
		{"world writable", 0o666, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte("hunter2\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode)
			for _, read := range []struct {
				name string
				f    func(string) error
			}{
				{"Read", func(p string) error { _, err := secretfile.Read(p); return err }},
				{"ReadToken", func(p string) error { _, err := secretfile.ReadToken(p); return err }},
				{"Check", secretfile.Check},
			} {
				err := read.f(path)
				if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, secretfile.ErrPermissions) {
					t.Fatalf("%s of a file at %v: got %v, want ok %v", read.name, tc.mode, err, tc.ok)
				}
				if err != nil && strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("%s: the error quotes the content", read.name)
				}
			}
		})
	}
}

// TestReadToken: a token or an id is the file's content without the white
// space around it, and an empty one is refused.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
		err              bool
	}{
		{"line ending", "tok-1\n", "tok-1", false},
		{"spaces and CRLF", "  tok-2 \r\n", "tok-2", false},
		{"empty", "\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			os.WriteFile(path, []byte(tc.body), 0o600)
			got, err := secretfile.ReadToken(path)
			if got != tc.want || (err != nil) != tc.err {
				t.Fatalf("got %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
