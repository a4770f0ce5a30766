package gen

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// Mismatch is one disagreement between a header set and Go bindings.
type Mismatch struct {
	Record string // C type, e.g. "struct ibv_port_attr"
	Member string // C member, empty for the record itself
	What   string // "size", "align" or "offset"
	C, Go  int64  // -1 when that side lacks it
}

func (m Mismatch) String() string {
	side := func(v int64) string {
		if v < 0 {
			return "missing"
		}
		return strconv.FormatInt(v, 10)
	}
	if m.Member == "" {
		return fmt.Sprintf("%s: %s: C %s, Go %s", m.Record, m.What, side(m.C), side(m.Go))
	}
	return fmt.Sprintf("%s member %s: %s: C %s, Go %s", m.Record, m.Member, m.What, side(m.C), side(m.Go))
}

// Verify compares the layouts the headers define (ir, after Names) with the
// Go types of already generated packages in dir (one subdirectory per
// package, as Emit lays them out), without compiling them: go/types computes
// the Go sizes and offsets, and accessor offsets are read from their
// bodies. It returns every mismatch, sorted.
func Verify(ir *IR, specs []PackageSpec, dir, importRoot string) ([]Mismatch, error) {
	fset := token.NewFileSet()
	pkgs := map[string]*types.Package{}
	accessors := map[string]map[string]int64{} // "pkg.Type" -> method -> offset
	std := importer.ForCompiler(fset, "source", nil)
	var imp types.ImporterFrom
	load := func(pkg string) (*types.Package, error) {
		if p := pkgs[pkg]; p != nil {
			return p, nil
		}
		files, err := filepath.Glob(filepath.Join(dir, pkg, "z*_types.go"))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("%s: no generated types file (z*_types.go)", filepath.Join(dir, pkg))
		}
		// The layouts that differ between architectures, this one's.
		arch, _ := filepath.Glob(filepath.Join(dir, pkg, "z*_types_"+runtime.GOARCH+".go"))
		files = append(files, arch...)
		var parsed []*ast.File
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				return nil, err
			}
			parsed = append(parsed, af)
			collectAccessors(af, pkg, accessors)
		}
		conf := types.Config{Importer: imp, Sizes: types.SizesFor("gc", runtime.GOARCH)}
		p, err := conf.Check(path.Join(importRoot, pkg), fset, parsed, nil)
		if err != nil {
			return nil, fmt.Errorf("type-checking %s: %w", filepath.Join(dir, pkg), err)
		}
		pkgs[pkg] = p
		return p, nil
	}
	imp = importerFunc(func(p, _ string, _ types.ImportMode) (*types.Package, error) {
		if rest, ok := strings.CutPrefix(p, importRoot+"/"); ok {
			return load(rest)
		}
		return std.Import(p)
	})
	sizes := types.SizesFor("gc", runtime.GOARCH)

	var out []Mismatch
	for _, r := range ir.Records {
		if r.Incomplete {
			continue
		}
		ct := r.CType()
		p, err := load(r.Package)
		if err != nil {
			return nil, err
		}
		obj := p.Scope().Lookup(r.GoName)
		if obj == nil {
			out = append(out, Mismatch{Record: ct, What: "size", C: r.Size, Go: -1})
			continue
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			return nil, fmt.Errorf("%s.%s is not a struct", r.Package, r.GoName)
		}
		if gs := sizes.Sizeof(st); gs != r.Size {
			out = append(out, Mismatch{Record: ct, What: "size", C: r.Size, Go: gs})
		}
		if ga := sizes.Alignof(st); ga != r.Align {
			out = append(out, Mismatch{Record: ct, What: "align", C: r.Align, Go: ga})
		}
		if r.System {
			continue
		}
		fieldOff := map[string]int64{}
		var fields []*types.Var
		for i := 0; i < st.NumFields(); i++ {
			fields = append(fields, st.Field(i))
		}
		for i, off := range sizes.Offsetsof(fields) {
			fieldOff[fields[i].Name()] = off
		}
		methods := accessors[r.Package+"."+r.GoName]
		for _, it := range layoutOf(r) {
			var goOff int64 = -1
			switch it.kind {
			case itemStorage:
				continue
			case itemField:
				if o, ok := fieldOff[it.goName]; ok {
					goOff = o
				}
			case itemAccessor, itemFlex:
				if o, ok := methods[it.goName]; ok {
					goOff = o
				}
			}
			if goOff != it.off {
				out = append(out, Mismatch{Record: ct, Member: it.cPath, What: "offset", C: it.off, Go: goOff})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

type importerFunc func(path, dir string, mode types.ImportMode) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path, "", 0) }
func (f importerFunc) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	return f(path, dir, mode)
}

// collectAccessors records, for every generated accessor method, the offset
// literal in its body: return (*T)(unsafe.Add(unsafe.Pointer(r), OFF)).
func collectAccessors(f *ast.File, pkg string, into map[string]map[string]int64) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
			continue
		}
		star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		recv, ok := star.X.(*ast.Ident)
		if !ok {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Add" {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok {
				return true
			}
			off, err := strconv.ParseInt(lit.Value, 0, 64)
			if err != nil {
				return true
			}
			key := pkg + "." + recv.Name
			if into[key] == nil {
				into[key] = map[string]int64{}
			}
			into[key][fd.Name.Name] = off
			return false
		})
	}
}
