// Package depmap holds CONTRIBUTING.md's map to the code: each Go package
// imports only what its row says it may, so that the map a newcomer reads
// is the one the compiler sees.
package depmap

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mcp-sealer/sealer/"

// row is one line of the map: the packages it names (a trailing * names
// every package with that prefix) and what they may import of this module.
type row struct {
	names    []string
	may      []string
	anything bool // "anything", or "everything above": the rows above
}

var ticked = regexp.MustCompile("`([^`]+)`")

// readMap reads the table under "## Map" of CONTRIBUTING.md.
func readMap(t *testing.T) []row {
	t.Helper()
	f, err := os.Open("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	inMap := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inMap = line == "## Map"
			continue
		}
		cells := strings.Split(line, "|")
		if !inMap || len(cells) < 5 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "package" {
			continue
		}
		var r row
		for _, m := range ticked.FindAllStringSubmatch(cells[1], -1) {
			r.names = append(r.names, m[1])
		}
		may := cells[3]
		for _, m := range ticked.FindAllStringSubmatch(may, -1) {
			r.may = append(r.may, m[1])
		}
		if strings.Contains(may, "everything above") {
			for _, above := range rows {
				r.may = append(r.may, above.names...)
			}
		}
		r.anything = strings.TrimSpace(may) == "anything"
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("CONTRIBUTING.md: %d rows under ## Map; the table moved?", len(rows))
	}
	return rows
}

// names reports whether pattern (a package, or a prefix ending in *) names
// the package p, or, as a parent, a package below it.
func names(pattern, p string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(p, prefix)
	}
	pattern = strings.TrimSuffix(pattern, "/")
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

// rowOf is the index of package p's row: the one naming it, or else its
// nearest parent's; -1 for none.
func rowOf(rows []row, p string) int {
	for q := p; q != "."; q = path.Dir(q) {
		for i, r := range rows {
			for _, n := range r.names {
				if n == q || strings.HasSuffix(n, "*") && names(n, q) {
					return i
				}
			}
		}
	}
	return -1
}

func TestMap_EveryPackageImportsWhatItsRowAllows(t *testing.T) {
	rows := readMap(t)
	dec := json.NewDecoder(strings.NewReader(goList(t, "-json", "./...")))
	checked := 0
	for dec.More() {
		var pkg struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		p, ok := strings.CutPrefix(pkg.ImportPath, module)
		if !ok || strings.HasPrefix(p, "gen/") {
			continue
		}
		i := rowOf(rows, p)
		if i < 0 {
			t.Errorf("%s: in no row of CONTRIBUTING.md's map", p)
			continue
		}
		checked++
		r := rows[i]
		for _, imp := range pkg.Imports {
			q, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			// A row a package imports sits above the package's own row:
			// the table reads top down as the layers do.
			switch j := rowOf(rows, q); {
			case j == i:
				continue // a row may name several packages, which use one another
			case j > i:
				t.Errorf("%s imports %s, which sits below it in CONTRIBUTING.md's map: dependencies point down", p, q)
			}
			if !r.anything && !slices.ContainsFunc(r.may, func(m string) bool { return names(m, q) }) {
				t.Errorf("%s imports %s, which its row in CONTRIBUTING.md's map does not allow (may import: %v)", p, q, r.may)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d packages against the map, want every package of the module", checked)
	}
}

// The format links nothing but the standard library and x/crypto; the
// client nothing that stores or serves (Vault, Redis, a ledger store, an
// MCP SDK); and the service's go.mod requires no MCP SDK: only
// client/gosdk, examples and e2e, modules of their own, may.
func TestMap_TheFormatAndTheClientLinkLittle(t *testing.T) {
	for _, dep := range strings.Fields(goList(t, "-deps", "./sealer")) {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(dep, module) &&
			!strings.HasPrefix(dep, "golang.org/x/crypto/") && dep != "golang.org/x/sys/cpu" {
			t.Errorf("sealer depends on %s; the format needs only the standard library and x/crypto", dep)
		}
	}
	forbidden := regexp.MustCompile(`vault|redis|bbolt|pebble|modelcontextprotocol`)
	for _, dep := range strings.Fields(goList(t, "-deps", "./client")) {
		if forbidden.MatchString(dep) {
			t.Errorf("client depends on %s; a client must not link what stores or serves", dep)
		}
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range regexp.MustCompile(`.*(modelcontextprotocol|jsonschema-go).*`).FindAll(gomod, -1) {
		t.Errorf("the service's go.mod names an MCP SDK (%s); only client/gosdk, examples and e2e may", strings.TrimSpace(string(line)))
	}
}

// goList runs go list in the module's root and returns what it printed.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
