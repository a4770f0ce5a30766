package gen

import (
	"fmt"
	"go/ast"
	"go/constant"
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
	// Decl is the C declaration: "struct ibv_port_attr", "enum
	// ibv_wc_status", "enum { IBV_X, ... }" for an anonymous enum, or
	// "macro IBV_LINK_LAYER_ETHERNET".
	Decl string
	// Member is a record's member or an enum's enumerator; empty for the
	// declaration itself.
	Member string
	What   string // "size", "align", "offset", "type" or "value"
	C, Go  string // "missing" where that side lacks the declaration
}

// missing stands in Mismatch for the side that lacks a declaration.
const missing = "missing"

func (m Mismatch) String() string {
	if m.Member == "" {
		return fmt.Sprintf("%s: %s: C %s, Go %s", m.Decl, m.What, m.C, m.Go)
	}
	part := "member"
	if strings.HasPrefix(m.Decl, "enum ") {
		part = "enumerator"
	}
	return fmt.Sprintf("%s %s %s: %s: C %s, Go %s", m.Decl, part, m.Member, m.What, m.C, m.Go)
}

// Verify compares what the headers define (ir, after Names) with already
// generated packages in dir (one subdirectory per package, as Emit lays
// them out), without compiling them, and returns every mismatch, sorted:
//   - of each struct and union, its size and alignment and, but for
//     glibc's opaque ones, each member's offset and type;
//   - of each named enum, its Go type;
//   - of each enumerator and integer macro, its value and type.
//
// go/types computes the Go sizes and offsets; accessor offsets are read
// from their bodies. Types are compared as the machine sees them: integer
// size and sign, bool, float size, pointer (any pointer, uintptr included),
// array length and element, and a record by its Go name; so a member whose
// sign changed is a mismatch even where its offsets all match. A
// declaration the Go side has and the headers do not is not reported.
//
// goarch is the architecture ir was laid out for (Build with that Target;
// "" for the host's): its per-architecture files are the ones read, and Go
// lays them out with its sizes.
func Verify(ir *IR, specs []PackageSpec, dir, importRoot, goarch string) ([]Mismatch, error) {
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	sizes := types.SizesFor("gc", goarch)
	if sizes == nil {
		return nil, fmt.Errorf("verify: unknown GOARCH %q", goarch)
	}
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
		arch, _ := filepath.Glob(filepath.Join(dir, pkg, "z*_types_"+goarch+".go"))
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
		conf := types.Config{Importer: imp, Sizes: sizes}
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
	lookup := func(pkg, name string) (types.Object, error) {
		p, err := load(pkg)
		if err != nil {
			return nil, err
		}
		return p.Scope().Lookup(name), nil
	}

	var out []Mismatch
	for _, r := range ir.Records {
		if r.Incomplete {
			continue
		}
		obj, err := lookup(r.Package, r.GoName)
		if err != nil {
			return nil, err
		}
		ms, err := verifyRecord(r, obj, accessors[r.Package+"."+r.GoName], sizes)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	for _, en := range ir.Enums {
		decl := "enum " + en.CName
		if en.CName == "" {
			decl = "enum { " + en.Enumerators[0].Name + ", ... }"
		}
		cType := sizedInt(en.Size, en.Signed)
		if en.GoName != "" {
			obj, err := lookup(en.Package, en.GoName)
			if err != nil {
				return nil, err
			}
			if g := declShape(obj); g != cType {
				out = append(out, Mismatch{Decl: decl, What: "type", C: cType, Go: g})
			}
		}
		for _, x := range en.Enumerators {
			obj, err := lookup(en.Package, x.GoName)
			if err != nil {
				return nil, err
			}
			out = append(out, verifyConst(decl, x.Name, cType, constValue(x.Value, en.Signed, en.Size), obj)...)
		}
	}
	for _, m := range ir.Macros {
		obj, err := lookup(m.Package, m.GoName)
		if err != nil {
			return nil, err
		}
		cType := sizedInt(m.Size, m.Signed)
		if m.Pointer {
			cType = "pointer"
		}
		out = append(out, verifyConst("macro "+m.Name, "", cType, constValue(m.Value, m.Signed && !m.Pointer, m.Size), obj)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// verifyRecord compares record r with obj, its Go type (nil if there is
// none), whose accessor methods sit at the offsets in accessors, laid out
// with sizes.
func verifyRecord(r *Record, obj types.Object, accessors map[string]int64, sizes types.Sizes) ([]Mismatch, error) {
	ct := r.CType()
	num := func(v int64) string { return strconv.FormatInt(v, 10) }
	if obj == nil {
		return []Mismatch{{Decl: ct, What: "size", C: num(r.Size), Go: missing}}, nil
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not a struct", r.Package, r.GoName)
	}
	var out []Mismatch
	if gs := sizes.Sizeof(st); gs != r.Size {
		out = append(out, Mismatch{Decl: ct, What: "size", C: num(r.Size), Go: num(gs)})
	}
	if ga := sizes.Alignof(st); ga != r.Align {
		out = append(out, Mismatch{Decl: ct, What: "align", C: num(r.Align), Go: num(ga)})
	}
	if r.System {
		return out, nil
	}
	fieldOff := map[string]int64{}
	fieldType := map[string]types.Type{}
	var fields []*types.Var
	for i := 0; i < st.NumFields(); i++ {
		fields = append(fields, st.Field(i))
		fieldType[st.Field(i).Name()] = st.Field(i).Type()
	}
	for i, off := range sizes.Offsetsof(fields) {
		fieldOff[fields[i].Name()] = off
	}
	for _, it := range layoutOf(r) {
		var goOff int64 = -1
		var goType types.Type
		switch it.kind {
		case itemStorage:
			continue
		case itemField:
			if o, ok := fieldOff[it.goName]; ok {
				goOff, goType = o, fieldType[it.goName]
			}
		case itemAccessor, itemFlex:
			if o, ok := accessors[it.goName]; ok {
				goOff, goType = o, accessorElem(obj.Type(), obj.Pkg(), it.goName)
			}
		}
		if goOff != it.off {
			g := missing
			if goOff >= 0 {
				g = num(goOff)
			}
			out = append(out, Mismatch{Decl: ct, Member: it.cPath, What: "offset", C: num(it.off), Go: g})
			continue
		}
		if c, g := cShape(it.typ), goShape(goType); c != g {
			out = append(out, Mismatch{Decl: ct, Member: it.cPath, What: "type", C: c, Go: g})
		}
	}
	return out, nil
}

// accessorElem is what the accessor method name of named type t points
// at: T of an accessor's *T, or of a flexible array's []T.
func accessorElem(t types.Type, pkg *types.Package, name string) types.Type {
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(t), true, pkg, name)
	fn, ok := obj.(*types.Func)
	if !ok {
		return nil
	}
	res := fn.Type().(*types.Signature).Results()
	if res.Len() != 1 {
		return nil
	}
	switch r := res.At(0).Type().(type) {
	case *types.Pointer:
		return r.Elem()
	case *types.Slice:
		return r.Elem()
	}
	return nil
}

// verifyConst compares C constant decl (an enum's enumerator member, or a
// macro with member empty), of type cType and value c, with obj, its Go
// constant (nil if there is none).
func verifyConst(decl, member, cType string, c constant.Value, obj types.Object) []Mismatch {
	at := func(what, c, g string) Mismatch {
		return Mismatch{Decl: decl, Member: member, What: what, C: c, Go: g}
	}
	k, ok := obj.(*types.Const)
	if !ok {
		return []Mismatch{at("value", c.ExactString(), missing)}
	}
	var out []Mismatch
	if g := goShape(k.Type()); g != cType {
		out = append(out, at("type", cType, g))
	}
	if !constant.Compare(k.Val(), token.EQL, c) {
		out = append(out, at("value", c.ExactString(), k.Val().ExactString()))
	}
	return out
}

// constValue is the value of a constant's two's complement bits v, read
// as a signed or unsigned integer of size bytes.
func constValue(v uint64, signed bool, size int64) constant.Value {
	if signed {
		return constant.MakeInt64(signExtend(v, size))
	}
	return constant.MakeUint64(v)
}

// declShape is the shape of a type declaration's type; "missing" for none.
func declShape(obj types.Object) string {
	tn, ok := obj.(*types.TypeName)
	if !ok {
		return missing
	}
	return goShape(tn.Type())
}

// cShape spells C type t as the machine sees it, in the words goShape uses
// for the Go type a generator emits for it: integers by size and sign (an
// enum's, a big-endian typedef's and a char's too), bool, float32 or
// float64, "pointer" for every pointer, arrays by length and element, and
// records as "struct" and their Go name.
func cShape(t *Type) string {
	switch t.Kind {
	case KInt:
		if t.Bool {
			return "bool"
		}
		return sizedInt(t.Size, t.Signed)
	case KEnum:
		return sizedInt(t.Size, t.Signed)
	case KFloat:
		return fmt.Sprintf("float%d", t.Size*8)
	case KPointer, KFuncPtr:
		return "pointer"
	case KArray:
		return fmt.Sprintf("[%d]%s", t.Len, cShape(t.Elem))
	case KRecord:
		return "struct " + t.Record.GoName
	}
	return "struct{}"
}

// goShape spells Go type t as cShape spells a C type; "missing" for nil.
func goShape(t types.Type) string {
	switch t := t.(type) {
	case nil:
		return missing
	case *types.Named:
		if _, ok := t.Underlying().(*types.Struct); ok {
			return "struct " + t.Obj().Name()
		}
		return goShape(t.Underlying())
	case *types.Basic:
		switch {
		case t.Kind() == types.Uintptr || t.Kind() == types.UnsafePointer:
			return "pointer"
		case t.Kind() == types.Uint8:
			return "uint8" // byte
		case t.Kind() == types.Int32:
			return "int32" // rune
		}
		return t.Name()
	case *types.Pointer:
		return "pointer"
	case *types.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), goShape(t.Elem()))
	case *types.Struct:
		if t.NumFields() == 0 {
			return "struct{}"
		}
	}
	return t.String()
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
