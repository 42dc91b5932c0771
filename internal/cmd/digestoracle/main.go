// Command digestoracle computes request digests with the Go core, for the
// Python client's differential test (clients/python/tests/
// test_digest_differential.py), which compares its digests with these. It is
// used only by tests.
//
// It reads lines from stdin, each a JSON object {"method": "...", "params":
// "..."} whose params is the params object as JSON text, in a string. For
// each it writes one line: the hex digest that mcpdigest.Request gives,
// or "refused", a tab and the error. A line that is not such an object gets
// "error", a tab and why. Each line is flushed as it is written, since the
// test drives it over a pipe one request at a time.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-sealer/sealer/mcpdigest"
)

type request struct {
	Method *string `json:"method"`
	Params *string `json:"params"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "digestoracle:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			fmt.Fprintln(w, answer(line))
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func answer(line []byte) string {
	var req request
	if err := json.Unmarshal(line, &req); err != nil || req.Method == nil || req.Params == nil {
		return "error\twant a JSON object with the strings method and params"
	}
	d, err := mcpdigest.Request(*req.Method, []byte(*req.Params))
	if err != nil {
		// One line per answer: the error may quote a name with a newline.
		return "refused\t" + strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(err.Error())
	}
	return d.String()
}
