package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// Every end-to-end test declares its lane of the test command as its first
// statement (testenv.Lane), so that a new test lands in a lane by what it
// says, never by its name.
func TestLanes_EveryTestDeclaresItsLane(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || len(fn.Name.Name) < 5 || fn.Name.Name[:4] != "Test" || fn.Name.Name == "TestMain" {
				continue
			}
			if !declaresLane(fn) {
				t.Errorf("%s: %s does not start with testenv.Lane(t, testenv.Lane...)", fset.Position(fn.Pos()), fn.Name.Name)
				continue
			}
			declared++
		}
	}
	if declared == 0 {
		t.Fatal("found no test")
	}
}

// declaresLane reports whether fn's first statement is testenv.Lane(t, testenv.X).
func declaresLane(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Lane" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	_, named := call.Args[1].(*ast.SelectorExpr)
	return ok && pkg.Name == "testenv" && named
}
