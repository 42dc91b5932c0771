package secretfile_test

import (
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
