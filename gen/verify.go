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
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Class tells what a Mismatch means for code built on the generated
// packages.
type Class int

const (
	// Breaking: something the packages rely on changed: a member moved,
	// was retyped or removed, a record shrank or changed alignment, a
	// constant changed its value or type, a prototype changed or is gone.
	// Code built on the packages would misread memory or call wrongly.
	Breaking Class = iota
	// Addition: the headers declare something the packages lack, without
	// changing anything they have: a new record, enum, enumerator, macro
	// constant or function, a member added in padding or reserved space or
	// past a record's old end (which the record grew by, at its end). The
	// packages stay correct; they only do not reach what is new.
	Addition
)

func (c Class) String() string {
	if c == Addition {
		return "addition"
	}
	return "breaking"
}

// Mismatch is one disagreement between a header set and Go bindings.
type Mismatch struct {
	Class Class
	// Decl is the C declaration: "struct ibv_port_attr", "enum
	// ibv_wc_status", "enum { IBV_X, ... }" for an anonymous enum,
	// "macro IBV_LINK_LAYER_ETHERNET", or "function ibv_query_port".
	Decl string
	// Member is a record's member or an enum's enumerator, or a function's
	// parameter ("parameter 2 (port_num)"); empty for the declaration
	// itself.
	Member string
	// What differs: "size", "align", "offset", "type", "value", and for a
	// function "prototype", "result", "parameters" (their number), or empty
	// for a parameter.
	What  string
	C, Go string // "missing" where that side lacks the declaration

	// older: the Go side has what the headers lack, in a way that is
	// growth if the headers are older than the packages (see Verify).
	older bool
	// neutral: an addition that says neither side is the newer one
	// (reserved space the headers took over).
	neutral bool
}

// missing stands in Mismatch for the side that lacks a declaration.
const missing = "missing"

func (m Mismatch) String() string {
	s := m.Decl
	if m.Member != "" {
		switch {
		case strings.HasPrefix(m.Decl, "enum "):
			s += " enumerator " + m.Member
		case strings.HasPrefix(m.Decl, "function "):
			s += " " + m.Member
		default:
			s += " member " + m.Member
		}
	}
	if m.What != "" {
		s += ": " + m.What
	}
	return fmt.Sprintf("%s: C %s, Go %s", s, m.C, m.Go)
}

// Verify compares what the headers define (ir, after Names) with already
// generated packages in dir (one subdirectory per package, as Emit lays
// them out), without compiling them, and returns every mismatch, sorted:
//   - of each struct and union, its size and alignment and, but for
//     glibc's opaque ones, each member's offset and type, and each member
//     of the Go type that the headers no longer have;
//   - of each named enum, its Go type;
//   - of each enumerator and integer macro, its value and type;
//   - of each function of a package that has stubs (z*_funcs.go; a
//     -layout-only package has none, and its functions are not compared),
//     its result and each parameter, and each stub whose C function the
//     headers no longer declare.
//
// go/types computes the Go sizes and offsets; accessor offsets are read
// from their bodies. Types are compared as the machine sees them: integer
// size and sign, bool, float size, pointer (any pointer, uintptr included),
// array length and element, a record by its Go name, an enum as its
// integer; so a member whose sign changed is a mismatch even where its
// offsets all match; but a plain C integer (member, parameter or result)
// that the Go side spells with an enum's type, as a Retypes patch makes
// it, is compared by size only: the Go value holds the C bits with the
// enum's sign (see shapesAgree). A record, enum or constant the Go side has and the
// headers do not is not reported (its Go declaration stays valid as
// such); a member or a function is.
//
// Each mismatch is classed (see Class): what is only new in the headers is
// an Addition, everything else Breaking. A member the Go side lacks is an
// addition when it overlaps no member both sides have (it sits in padding,
// in reserved space, or past the old end; a union's new alternative may
// share its storage), a Go member the headers lack is one when its name
// says it is reserved space (isReserved: rdma-core extends structures by
// taking over reserved bytes, as CheckGrowth accepts), as is a reserved
// member that shrank or moved within its old bytes, and a record whose
// size grew is one (its members, checked one by one, say whether it grew
// only at its end). Records that grow at their front (FrontGrowing) are
// compared as CheckGrowth does: member offsets relative to the anchor, and
// new members only in front of it.
//
// A stub's Go signature follows its error convention, which its doc
// comment names ("error convention ..."); the C result is read back
// through it: "errno returned", "-1 and errno" and the getaddrinfo code
// stand for a C int (32-bit, signed), "NULL and errno" for the pointer the
// stub returns beside its error, and "count or error" for a signed integer
// of any size (the stub returns it as an int, so its C width cannot be
// checked). Parameters are passed one to one.
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
	cNames := map[string]map[string]string{}   // "pkg.Type" -> field -> C member, from its comment
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
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				return nil, err
			}
			parsed = append(parsed, af)
			collectAccessors(af, pkg, accessors)
			collectFieldNames(af, pkg, cNames)
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
		key := r.Package + "." + r.GoName
		ms, err := verifyRecord(r, obj, accessors[key], cNames[key], sizes)
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
				class := Breaking
				if g == missing {
					class = Addition
				}
				out = append(out, Mismatch{Class: class, Decl: decl, What: "type", C: cType, Go: g})
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
	for _, spec := range specs {
		ms, err := verifyFuncs(ir, spec.Name, dir, importRoot, fset, lookup)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	// What only the Go side has is growth when the headers are older
	// than the packages, that is when they add nothing of their own.
	newer := false
	for _, m := range out {
		newer = newer || m.Class == Addition && !m.older && !m.neutral
	}
	for i := range out {
		if out[i].older && newer {
			out[i].Class = Breaking
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// verifyRecord compares record r with obj, its Go type (nil if there is
// none), whose accessor methods sit at the offsets in accessors and whose
// fields mirror the C members cNames names, laid out with sizes. See Verify
// for how each mismatch is classed.
func verifyRecord(r *Record, obj types.Object, accessors map[string]int64, cNames map[string]string, sizes types.Sizes) ([]Mismatch, error) {
	ct := r.CType()
	num := func(v int64) string { return strconv.FormatInt(v, 10) }
	if obj == nil {
		return []Mismatch{{Class: Addition, Decl: ct, What: "size", C: num(r.Size), Go: missing}}, nil
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not a struct", r.Package, r.GoName)
	}
	// The Go members: named fields, and accessors of what shares storage.
	type goMember struct {
		off, size int64
		typ       types.Type
		accessor  bool
	}
	goMembers := map[string]goMember{}
	var goOrder []string
	var fields []*types.Var
	for i := 0; i < st.NumFields(); i++ {
		fields = append(fields, st.Field(i))
	}
	for i, off := range sizes.Offsetsof(fields) {
		if f := fields[i]; f.Name() != "_" {
			goMembers[f.Name()] = goMember{off, sizes.Sizeof(f.Type()), f.Type(), false}
			goOrder = append(goOrder, f.Name())
		}
	}
	for name, off := range accessors {
		var size int64
		t := accessorElem(obj.Type(), obj.Pkg(), name)
		if t != nil {
			size = sizes.Sizeof(t)
		}
		goMembers[name] = goMember{off, size, t, true}
		goOrder = append(goOrder, name)
	}
	sort.Strings(goOrder[len(goOrder)-len(accessors):])

	var out []Mismatch
	add := func(class Class, member, what, c, g string) {
		out = append(out, Mismatch{Class: class, Decl: ct, Member: member, What: what, C: c, Go: g})
	}
	items := layoutOf(r)
	inC := map[string]bool{}
	for _, it := range items {
		if it.kind != itemStorage {
			inC[it.goName] = true
		}
	}
	// Offsets are compared as off - base: relative to the anchor for a
	// record that grows at its front, absolute for any other.
	var cBase, goBase int64
	anchor := FrontGrowing[r.Describe()]
	if anchor != "" {
		ca, cOK := int64(-1), false
		for _, it := range items {
			if it.kind == itemField && it.cPath == anchor {
				ca, cOK = it.off, true
			}
		}
		ga, gOK := goMembers[fieldName(anchor)]
		if !cOK || !gOK || ga.accessor {
			add(Breaking, anchor, "offset", orMissing(cOK, ca), orMissing(gOK && !ga.accessor, ga.off))
			anchor = "" // compare the rest as any other record's
		} else {
			cBase, goBase = ca, ga.off
		}
	}
	gs, ga := sizes.Sizeof(st), sizes.Alignof(st)
	if gs != r.Size {
		// The front may grow, and the anchor at the end; nothing shrinks.
		cGrew, goGrew := r.Size > gs, gs > r.Size
		if anchor != "" {
			cGrew = cBase >= goBase && r.Size-cBase >= gs-goBase
			goGrew = goBase >= cBase && gs-goBase >= r.Size-cBase
		}
		switch {
		case cGrew:
			add(Addition, "", "size", num(r.Size), num(gs))
		case goGrew:
			add(Addition, "", "size", num(r.Size), num(gs))
			out[len(out)-1].older = true
		default:
			add(Breaking, "", "size", num(r.Size), num(gs))
		}
	}
	if ga != r.Align {
		add(Breaking, "", "align", num(r.Align), num(ga))
	}
	if r.System {
		return out, nil
	}
	for _, it := range items {
		if it.kind == itemStorage {
			continue
		}
		g, ok := goMembers[it.goName]
		if ok && g.accessor != (it.kind == itemAccessor || it.kind == itemFlex) {
			ok = false // a field that became an accessor, or the other way round: Go has no such member
		}
		if !ok {
			// New in C: compatible where it takes no byte of a member both
			// sides have (a union's new alternative shares its storage by
			// design), and, in a record that grows at its front, where it
			// is in front of the anchor.
			class := Addition
			rel, size := it.off-cBase, it.typ.Size
			if anchor != "" && rel >= 0 {
				class = Breaking
			}
			for _, name := range goOrder {
				o := goMembers[name]
				if o.accessor || !inC[name] || it.kind == itemAccessor || isReserved(name) {
					continue
				}
				if orel := o.off - goBase; rel < orel+o.size && orel < rel+size {
					class = Breaking
				}
			}
			add(class, it.cPath, "offset", num(it.off), missing)
			continue
		}
		if crel, grel := it.off-cBase, g.off-goBase; crel != grel {
			// Reserved space one side took part of keeps within its old
			// bytes (CheckGrowth's "reserved shrunk").
			cEnd, gEnd := crel+it.typ.Size, grel+g.size
			if isReserved(it.cPath) && (crel >= grel && cEnd <= gEnd || grel >= crel && gEnd <= cEnd) {
				add(Addition, it.cPath, "offset", num(it.off), num(g.off))
				out[len(out)-1].neutral = true
				continue
			}
			add(Breaking, it.cPath, "offset", num(it.off), num(g.off))
			continue
		}
		if c, gt := cShape(it.typ), goValueShape(g.typ); !shapesAgree(it.typ, c, gt) {
			if isReserved(it.cPath) {
				// Reserved space one side took over part of, or gave back:
				// what moved into it or out of it is checked on its own.
				add(Addition, it.cPath, "type", c, plainShape(gt))
				out[len(out)-1].neutral = true
				continue
			}
			add(Breaking, it.cPath, "type", c, plainShape(gt))
		}
	}
	// Members of the Go type the headers no longer have: removed, or, for
	// reserved space, taken over by new members.
	for _, name := range goOrder {
		if inC[name] {
			continue
		}
		g := goMembers[name]
		member := cNames[name]
		if member == "" {
			member = name + " (Go)"
		}
		if isReserved(member) || isReserved(name) {
			add(Addition, member, "offset", missing, num(g.off))
			out[len(out)-1].neutral = true
			continue
		}
		// Growth of the Go side if it takes no byte of a member both sides
		// have (and, growing at the front, is in front of the anchor).
		class := Addition
		rel := g.off - goBase
		if anchor != "" && rel >= 0 {
			class = Breaking
		}
		for _, it := range items {
			if it.kind != itemField || !inC[it.goName] || g.accessor || isReserved(it.cPath) {
				continue
			}
			if o, ok := goMembers[it.goName]; !ok || o.accessor {
				continue
			}
			if crel := it.off - cBase; rel < crel+it.typ.Size && crel < rel+g.size {
				class = Breaking
			}
		}
		add(class, member, "offset", missing, num(g.off))
		out[len(out)-1].older = class == Addition
	}
	return out, nil
}

// orMissing spells an offset found (ok) or not.
func orMissing(ok bool, off int64) string {
	if !ok {
		return missing
	}
	return strconv.FormatInt(off, 10)
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
		m := at("value", c.ExactString(), missing)
		m.Class = Addition
		return []Mismatch{m}
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

// enumShape prefixes the shape of an integer that the Go side spells with
// an enum's type (goValueShape).
const enumShape = "enum "

// goValueShape is goShape for the type of a member, parameter or result:
// an integer the Go side spells with a named type of the generated
// packages other than the big-endian ones is an enum's ("enum uint32"), a
// C enum's or one a Retypes patch gave it.
func goValueShape(t types.Type) string {
	if n, ok := t.(*types.Named); ok {
		if b, ok := n.Underlying().(*types.Basic); ok && b.Info()&types.IsInteger != 0 && !isBeType(n.Obj().Name()) {
			return enumShape + goShape(b)
		}
	}
	return goShape(t)
}

func isBeType(name string) bool {
	for _, n := range beTypes {
		if n == name {
			return true
		}
	}
	return false
}

// shapesAgree reports whether C shape c, of C type t, is what Go shape g
// stands for. A plain C integer the Go side spells with an enum's type (a
// Retypes patch) agrees with it when their sizes do, whatever their signs:
// the Go value holds the C value's bits with the enum's sign, which the
// enum's own check compares, and the layout test with gcc's (the
// membersigned rows of retyped members). So neither a retyped int
// (ibv_modify_qp's attr_mask, a uint32 QPAttrMask) nor the plain integer
// of a release whose headers lack that entry's enum reads as a change. A C
// enum is compared with its Go type as any integer is, sign included.
func shapesAgree(t *Type, c, g string) bool {
	if e, ok := strings.CutPrefix(g, enumShape); ok {
		if t.Kind == KInt && !t.Bool {
			return sizeOfShape(c) == sizeOfShape(e)
		}
		return c == e
	}
	return c == g
}

// plainShape is shape s as messages spell it: an enum's integer as the
// integer.
func plainShape(s string) string { return strings.TrimPrefix(s, enumShape) }

func plainShapes(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = plainShape(s)
	}
	return out
}

// sizeOfShape is the size in bytes of an integer shape ("int32", "uint8"),
// 0 for any other.
func sizeOfShape(s string) int {
	s = strings.TrimPrefix(strings.TrimPrefix(s, enumShape), "u")
	bits, ok := strings.CutPrefix(s, "int")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(bits)
	if err != nil {
		return 0
	}
	return n / 8
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

// collectFieldNames records, for every field of a generated struct, the C
// member its line comment names ("// lid @34"), and for every accessor the
// one its doc comment names ("returns a pointer to member arg"), where they
// name one.
func collectFieldNames(f *ast.File, pkg string, into map[string]map[string]string) {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 && fd.Doc != nil {
			star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			recv, ok := star.X.(*ast.Ident)
			if m := accessorMember.FindStringSubmatch(fd.Doc.Text()); ok && m != nil {
				key := pkg + "." + recv.Name
				if into[key] == nil {
					into[key] = map[string]string{}
				}
				into[key][fd.Name.Name] = m[1]
			}
			continue
		}
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fl := range st.Fields.List {
				if fl.Comment == nil || len(fl.Names) != 1 {
					continue
				}
				c, _, ok := strings.Cut(strings.TrimSpace(fl.Comment.Text()), " @")
				if !ok || !cPath.MatchString(c) {
					continue
				}
				key := pkg + "." + ts.Name.Name
				if into[key] == nil {
					into[key] = map[string]string{}
				}
				into[key][fl.Names[0].Name] = c
			}
		}
	}
}

// accessorMember finds the C member an accessor's doc comment names.
var accessorMember = regexp.MustCompile(`\bmember ([A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9_])`)

// cPath is a member path as offsetof spells it: "lid", "wr.rdma.rkey".
var cPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*$`)

// A stub is what verify reads of a generated Go function that calls a C
// function: the C function's name and the shapes (goShape) of the C
// prototype its Go signature stands for.
type stub struct {
	cName  string
	pos    token.Position
	result string   // a shape, "void", or resultSignedInt
	params []string // shapes
}

// resultSignedInt is the result a "count or error" stub stands for: a
// signed integer whose width its Go int does not tell.
const resultSignedInt = "a signed integer"

var (
	// stubDoc is how every stub's doc comment starts (see emitter.stub).
	stubDoc = regexp.MustCompile(`^(\w+) calls (\w+) \(`)
	// stubConvention is where the doc comment names the error convention.
	stubConvention = regexp.MustCompile(`error convention "([^"]+)"`)
)

// readStubs reads the stubs of package pkg in dir/pkg, keyed by C name;
// nil if the package has no stubs file (generated -layout-only). shape
// spells a type expression of a file of the package as goShape does.
func readStubs(dir, pkg string, fset *token.FileSet, shape func(*ast.File, ast.Expr) (string, error)) (map[string]stub, error) {
	files, err := filepath.Glob(filepath.Join(dir, pkg, "z*_funcs.go"))
	if err != nil || len(files) == 0 {
		return nil, nil
	}
	stubs := map[string]stub{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Doc == nil {
				continue
			}
			doc := strings.Join(strings.Fields(fd.Doc.Text()), " ")
			m := stubDoc.FindStringSubmatch(doc)
			if m == nil || m[1] != fd.Name.Name {
				continue // not a stub: the loader's API, helpers
			}
			pos := fset.Position(fd.Pos())
			conv := stubConvention.FindStringSubmatch(doc)
			if conv == nil {
				return nil, fmt.Errorf("%s: stub %s names no error convention in its doc comment", pos, fd.Name.Name)
			}
			s := stub{cName: m[2], pos: pos}
			for _, fl := range fd.Type.Params.List {
				sh, err := shape(f, fl.Type)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", fset.Position(fl.Pos()), err)
				}
				for range max(1, len(fl.Names)) {
					s.params = append(s.params, sh)
				}
			}
			var results []string
			if fd.Type.Results != nil {
				for _, fl := range fd.Type.Results.List {
					sh, err := shape(f, fl.Type)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", fset.Position(fl.Pos()), err)
					}
					for range max(1, len(fl.Names)) {
						results = append(results, sh)
					}
				}
			}
			if s.result, err = cResultOf(conv[1], results); err != nil {
				return nil, fmt.Errorf("%s: stub %s: %w", pos, fd.Name.Name, err)
			}
			stubs[s.cName] = s
		}
	}
	return stubs, nil
}

// cResultOf maps the Go results of a stub with error convention conv back
// to the C result they stand for (see Convention and emitter.stub).
func cResultOf(conv string, results []string) (string, error) {
	bad := func() (string, error) {
		return "", fmt.Errorf("results (%s) do not follow error convention %q", strings.Join(results, ", "), conv)
	}
	switch conv {
	case CannotFail.String():
		// A function an older pinned release lacks returns an error too.
		if n := len(results); n > 0 && results[n-1] == "error" {
			results = results[:n-1]
		}
		switch len(results) {
		case 0:
			return "void", nil
		case 1:
			return results[0], nil
		}
	case NullErrno.String():
		if len(results) == 2 && results[0] == "pointer" && results[1] == "error" {
			return "pointer", nil
		}
	case ErrnoResult.String(), MinusOneErrno.String(), GetaddrinfoCode.String():
		if len(results) == 1 && results[0] == "error" {
			return "int32", nil // Convention.fits: a 32-bit signed int
		}
	case CountOrError.String():
		if len(results) == 2 && results[0] == "int" && results[1] == "error" {
			return resultSignedInt, nil
		}
	default:
		return "", fmt.Errorf("unknown error convention %q", conv)
	}
	return bad()
}

// cResult spells the result of C function fn as a stub's is read back.
func cResult(fn *Func) string {
	if fn.Result.Kind == KVoid {
		return "void"
	}
	return cShape(fn.Result)
}

// resultsAgree reports whether C result c (cResult), of type t, is what
// stub result g stands for.
func resultsAgree(t *Type, c, g string) bool {
	if g == resultSignedInt {
		return slices.Contains([]string{"int8", "int16", "int32", "int64"}, c)
	}
	return shapesAgree(t, c, g)
}

// prototype spells a prototype in shapes: "int32(pointer, uint8)".
func prototype(result string, params []string) string {
	return result + "(" + strings.Join(params, ", ") + ")"
}

// verifyFuncs compares the functions of package pkg in ir with its stubs
// in dir; nothing if it has none. lookup finds a declaration of a package
// under importRoot, by package name.
func verifyFuncs(ir *IR, pkg, dir, importRoot string, fset *token.FileSet, lookup func(pkg, name string) (types.Object, error)) ([]Mismatch, error) {
	shape := func(f *ast.File, e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.StarExpr:
			return "pointer", nil
		case *ast.Ident:
			if e.Name == "error" {
				return "error", nil
			}
			obj, err := lookup(pkg, e.Name)
			if err != nil {
				return "", err
			}
			if obj == nil {
				obj = types.Universe.Lookup(e.Name)
			}
			if obj == nil {
				return "", fmt.Errorf("type %s is not declared in package %s", e.Name, pkg)
			}
			return goValueShape(obj.Type()), nil
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			if !ok {
				break
			}
			if x.Name == "unsafe" && e.Sel.Name == "Pointer" {
				return "pointer", nil
			}
			for _, im := range f.Imports {
				p, err := strconv.Unquote(im.Path.Value)
				if err != nil {
					continue
				}
				name := path.Base(p)
				if im.Name != nil {
					name = im.Name.Name
				}
				rest, under := strings.CutPrefix(p, importRoot+"/")
				if name != x.Name || !under {
					continue
				}
				obj, err := lookup(rest, e.Sel.Name)
				if err != nil {
					return "", err
				}
				if obj == nil {
					return "", fmt.Errorf("type %s is not declared in package %s", e.Sel.Name, p)
				}
				return goValueShape(obj.Type()), nil
			}
		case *ast.ArrayType, *ast.FuncType, *ast.MapType, *ast.ChanType:
			// Not a type a stub passes: spelled as it is, it never matches.
		}
		return types.ExprString(e), nil
	}
	stubs, err := readStubs(dir, pkg, fset, shape)
	if err != nil || stubs == nil {
		return nil, err
	}
	var out []Mismatch
	inC := map[string]bool{}
	for _, fn := range ir.Funcs {
		if fn.Package != pkg {
			continue
		}
		inC[fn.Name] = true
		decl := "function " + fn.Name
		var params []string
		for _, p := range fn.Params {
			params = append(params, cShape(p.Type))
		}
		s, ok := stubs[fn.Name]
		if !ok {
			out = append(out, Mismatch{Class: Addition, Decl: decl, What: "prototype", C: prototype(cResult(fn), params), Go: missing})
			continue
		}
		if c := cResult(fn); !resultsAgree(fn.Result, c, s.result) {
			out = append(out, Mismatch{Decl: decl, What: "result", C: c, Go: plainShape(s.result)})
		}
		if len(params) != len(s.params) {
			out = append(out, Mismatch{Decl: decl, What: "parameters", C: prototype(cResult(fn), params), Go: prototype(plainShape(s.result), plainShapes(s.params))})
			continue
		}
		for i, c := range params {
			if !shapesAgree(fn.Params[i].Type, c, s.params[i]) {
				out = append(out, Mismatch{Decl: decl, Member: fmt.Sprintf("parameter %d (%s)", i+1, fn.Params[i].Name), C: c, Go: plainShape(s.params[i])})
			}
		}
	}
	for name, s := range stubs {
		if !inC[name] {
			// Breaking, unless the headers are older than the packages
			// (see Verify): the loader then reports it missing when called.
			out = append(out, Mismatch{Class: Addition, older: true, Decl: "function " + name, What: "prototype", C: missing, Go: prototype(plainShape(s.result), plainShapes(s.params))})
		}
	}
	return out, nil
}
