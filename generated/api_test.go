package generated

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoCgoTypesExported parses the generated packages and fails if any
// exported function, method or type mentions a cgo type (C.something): cgo
// types are private to each package, so they must never reach a caller.
func TestNoCgoTypesExported(t *testing.T) {
	files, err := filepath.Glob("*/z*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated files found: %v", err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			var node ast.Node
			var ident string
			switch d := d.(type) {
			case *ast.FuncDecl:
				node, ident = d.Type, d.Name.Name
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.IsExported() {
						checkNoC(t, fset, ts.Name.Name, ts.Type)
						checked++
					}
				}
				continue
			}
			if !ast.IsExported(ident) {
				continue
			}
			checkNoC(t, fset, ident, node)
			checked++
		}
	}
	t.Logf("checked %d exported declarations in %d generated files", checked, len(files))
}

func checkNoC(t *testing.T, fset *token.FileSet, name string, n ast.Node) {
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "C" {
				t.Errorf("%s: %s exposes cgo type C.%s", fset.Position(sel.Pos()), name, sel.Sel.Name)
			}
		}
		return !strings.HasPrefix(name, "_")
	})
}
