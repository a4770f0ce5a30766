package gen

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// EmitOptions configures the emitted files.
type EmitOptions struct {
	Command    string // the command line recorded at the top of every file
	ImportRoot string // import path of the output root ("github.com/goverbs/goverbs/generated")
	// LayoutOnly leaves out the cgo stubs: the packages then hold pure Go
	// layouts and constants and link against nothing.
	LayoutOnly bool
	// LayoutPkg, if set, is the import path of the layout test package to
	// emit (the C oracle and the Go table); its files are keyed "layout/...".
	LayoutPkg string
	// IncludeDir, if set, is the include directory every cgo preamble
	// searches first, relative to the output root (slash-separated): the
	// packages then build against the headers they were generated from,
	// never the machine's. LayoutIncludeDir is the same directory relative
	// to the layout test package.
	IncludeDir, LayoutIncludeDir string
	// LayoutHeaders is, when LayoutIncludeDir is empty, the directory the
	// layout test reads the headers from to check they are the ones it was
	// generated from (IR.Read): the generator's headers directory, relative
	// to the layout test package if it was given relative. The test's C side
	// then compiles against the machine's headers, so the environment
	// variable layoutcheck.HeadersEnv overrides it.
	LayoutHeaders string
	// Since maps an extern function to the oldest pinned rdma-core release
	// that declares it, for the error a call gets when the loaded library
	// lacks it; a function not in a non-nil Since is declared by no pinned
	// release. Nil: nothing is dated.
	Since map[string]string
	// Target, for Emit, is the architecture the IR was laid out for (the
	// host's): the layout assertions then hold only where its Define is
	// predefined, and a build for another architecture fails with an
	// #error that names it, not with every assertion that no longer holds.
	// Zero: no guard. EmitTargets guards each architecture itself.
	Target Target
}

// File is one emitted file: a path relative to the output root (or
// "layout/NAME" for the layout test package) and its bytes.
type File struct {
	Path string
	Data []byte
}

// beTypes are the big-endian typedefs of the kernel headers: Go keeps them as
// distinct types so that byte order is never forgotten.
var beTypes = map[string]string{"__be16": "Be16", "__be32": "Be32", "__be64": "Be64"}

type emitter struct {
	ir    *IR
	specs []PackageSpec
	opt   EmitOptions
	// irs and targets, when there are several targets: the same headers
	// modeled for each architecture (ir is one of them). Declarations that
	// render the same for all go in the common files, the others in
	// per-architecture ones.
	irs     []*IR
	targets []Target
}

// Emit renders the IR into Go files, one set per package, in a fixed order.
func Emit(ir *IR, specs []PackageSpec, opt EmitOptions) ([]File, error) {
	e := &emitter{ir: ir, specs: specs, opt: opt}
	return e.emit()
}

// EmitTargets renders the same headers modeled for several architectures
// (irs[i] for targets[i]), in the x/sys style: what is the same on all of
// them goes in the common files; each record, enum, constant block or alias
// that differs goes in z<pkg>_types_<goarch>.go, and the layout assertions
// of the cgo preamble that differ go in #if blocks on each architecture's
// predefined macro. Everything else (stubs, loader, layout test) must come
// out identical for every architecture, or EmitTargets fails.
func EmitTargets(irs []*IR, targets []Target, specs []PackageSpec, opt EmitOptions) ([]File, error) {
	if len(irs) != len(targets) || len(irs) == 0 {
		return nil, fmt.Errorf("EmitTargets: %d models for %d targets", len(irs), len(targets))
	}
	if len(irs) == 1 {
		return Emit(irs[0], specs, opt)
	}
	for k := 1; k < len(irs); k++ {
		if err := sameDecls(irs[0], irs[k]); err != nil {
			return nil, fmt.Errorf("%s and %s: %w", targets[0].Name(), targets[k].Name(), err)
		}
	}
	var first []File
	for k := range irs {
		e := &emitter{ir: irs[k], specs: specs, opt: opt, irs: irs, targets: targets}
		files, err := e.emit()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", targets[k].Name(), err)
		}
		if k == 0 {
			first = files
			continue
		}
		if len(files) != len(first) {
			return nil, fmt.Errorf("%s and %s: %d files against %d", targets[0].Name(), targets[k].Name(), len(first), len(files))
		}
		for i := range files {
			if files[i].Path != first[i].Path || !bytes.Equal(files[i].Data, first[i].Data) {
				return nil, fmt.Errorf("%s differs between %s and %s: only type layouts and layout assertions are split by architecture",
					first[i].Path, targets[0].Name(), targets[k].Name())
			}
		}
	}
	return first, nil
}

// sameDecls fails unless a and b declare the same things in the same order:
// the per-architecture split pairs them by index.
func sameDecls(a, b *IR) error {
	if len(a.Records) != len(b.Records) || len(a.Enums) != len(b.Enums) || len(a.Macros) != len(b.Macros) ||
		len(a.Aliases) != len(b.Aliases) || len(a.Funcs) != len(b.Funcs) {
		return fmt.Errorf("the headers declare different things (records %d/%d, enums %d/%d, macros %d/%d, aliases %d/%d, functions %d/%d)",
			len(a.Records), len(b.Records), len(a.Enums), len(b.Enums), len(a.Macros), len(b.Macros),
			len(a.Aliases), len(b.Aliases), len(a.Funcs), len(b.Funcs))
	}
	for i, r := range a.Records {
		q := b.Records[i]
		if r.Describe() != q.Describe() || r.Pos != q.Pos || r.GoName != q.GoName || r.Package != q.Package {
			return fmt.Errorf("record %d is %s (%s) against %s (%s)", i, r.Describe(), r.Pos, q.Describe(), q.Pos)
		}
	}
	for i, en := range a.Enums {
		if q := b.Enums[i]; en.CName != q.CName || en.Pos != q.Pos || en.Package != q.Package {
			return fmt.Errorf("enum %d is %s (%s) against %s (%s)", i, en.CName, en.Pos, q.CName, q.Pos)
		}
	}
	for i, m := range a.Macros {
		if q := b.Macros[i]; m.Name != q.Name || m.Package != q.Package {
			return fmt.Errorf("macro %d is %s against %s", i, m.Name, q.Name)
		}
	}
	for i, al := range a.Aliases {
		if q := b.Aliases[i]; al.Name != q.Name || al.Package != q.Package {
			return fmt.Errorf("alias %d is %s against %s", i, al.Name, q.Name)
		}
	}
	return nil
}

func (e *emitter) emit() ([]File, error) {
	opt, specs := e.opt, e.specs
	var files []File
	for i := range specs {
		spec := &specs[i]
		fs, err := e.typesFiles(spec, i == 0)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
		if !opt.LayoutOnly {
			f, err := e.funcsFile(spec)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
			c, err := e.loaderFile(spec)
			if err != nil {
				return nil, err
			}
			if c != nil {
				files = append(files, *c)
			}
			if h := e.namesFile(spec); h != nil {
				files = append(files, *h)
			}
		}
	}
	if opt.LayoutPkg != "" {
		fs, err := e.layoutFiles()
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	return files, nil
}

func (e *emitter) header(f *jen.File) {
	v := e.ir.Version
	if v == "" {
		v = "unknown"
	}
	f.HeaderComment(e.opt.Command)
	f.HeaderComment(fmt.Sprintf("Code generated by the command above from rdma-core %s. DO NOT EDIT.", v))
}

func (e *emitter) pkgPath(pkg string) string { return path.Join(e.opt.ImportRoot, pkg) }

func render(name string, f *jen.File) (File, error) {
	var b bytes.Buffer
	if err := f.Render(&b); err != nil {
		return File{}, fmt.Errorf("rendering %s: %s", name, firstLine(err.Error()))
	}
	return File{Path: name, Data: b.Bytes()}, nil
}

// goType is the Go spelling of a C type, as seen from package pkg.
func (e *emitter) goType(t *Type) jen.Code {
	if t.GoEnum != nil { // a Retypes patch: the enum's type, cgo still converts to the C type
		return jen.Qual(e.pkgPath(t.GoEnum.Package), t.GoEnum.GoName)
	}
	switch t.Kind {
	case KVoid:
		return jen.Struct()
	case KInt:
		if n, ok := beTypes[t.Typedef]; ok {
			return jen.Qual(e.pkgPath(e.specs[0].Name), n)
		}
		return jen.Id(intType(t))
	case KFloat:
		if t.Size == 4 {
			return jen.Float32()
		}
		return jen.Float64()
	case KPointer:
		if t.Elem.Kind == KVoid || t.Elem.Kind == KFuncPtr {
			return jen.Qual("unsafe", "Pointer")
		}
		return jen.Op("*").Add(e.goType(t.Elem))
	case KFuncPtr:
		return jen.Uintptr()
	case KArray:
		return jen.Index(jen.Lit(int(t.Len))).Add(e.goType(t.Elem))
	case KRecord:
		return jen.Qual(e.pkgPath(t.Record.Package), t.Record.GoName)
	case KEnum:
		if t.Enum.GoName == "" {
			return jen.Id(sizedInt(t.Size, t.Signed))
		}
		return jen.Qual(e.pkgPath(t.Enum.Package), t.Enum.GoName)
	}
	panic(fmt.Sprintf("goType: kind %d", t.Kind))
}

func intType(t *Type) string {
	if t.Bool {
		return "bool"
	}
	return sizedInt(t.Size, t.Signed)
}

func sizedInt(size int64, signed bool) string {
	s := fmt.Sprintf("int%d", size*8)
	if !signed {
		s = "u" + s
	}
	return s
}

// typesFiles emits the layouts, enums, constants and aliases of one
// package: one file, or with several targets the common file and one per
// architecture.
func (e *emitter) typesFiles(spec *PackageSpec, first bool) ([]File, error) {
	newFile := func() *jen.File { return jen.NewFilePathName(e.pkgPath(spec.Name), spec.Name) }
	f := newFile()
	e.header(f)
	if first {
		e.beTypes(f)
	}
	decls := e.typeDecls(spec)
	base := path.Join(spec.Name, "z"+spec.Name+"_types")
	if e.irs == nil {
		for _, d := range decls {
			if err := d(f, e.ir); err != nil {
				return nil, err
			}
		}
		out, err := render(base+".go", f)
		return []File{out}, err
	}
	arch := make([]*jen.File, len(e.targets))
	for k, t := range e.targets {
		arch[k] = newFile()
		e.header(arch[k])
		arch[k].HeaderComment(fmt.Sprintf("The declarations of package %s whose layout on %s differs from another architecture's; the others are in %s.go.",
			spec.Name, t.Name(), path.Base(base)))
	}
	for _, d := range decls {
		var texts [][]byte
		for k := range e.irs {
			scratch := newFile()
			if err := d(scratch, e.irs[k]); err != nil {
				return nil, err
			}
			var b bytes.Buffer
			if err := scratch.Render(&b); err != nil {
				return nil, fmt.Errorf("rendering %s: %s", base, firstLine(err.Error()))
			}
			texts = append(texts, b.Bytes())
		}
		same := true
		for _, t := range texts[1:] {
			same = same && bytes.Equal(t, texts[0])
		}
		if same {
			if err := d(f, e.irs[0]); err != nil {
				return nil, err
			}
			continue
		}
		for k := range e.irs {
			if err := d(arch[k], e.irs[k]); err != nil {
				return nil, err
			}
		}
	}
	out, err := render(base+".go", f)
	if err != nil {
		return nil, err
	}
	files := []File{out}
	for k, t := range e.targets {
		out, err := render(base+"_"+t.GOARCH+".go", arch[k])
		if err != nil {
			return nil, err
		}
		files = append(files, out)
	}
	return files, nil
}

// typeDecl emits one declaration (or a block of them) from ir into f.
type typeDecl func(f *jen.File, ir *IR) error

// typeDecls lists the declarations of one package's types file, in order:
// the i-th record, enum or alias of every target's IR is the same C
// declaration (see sameDecls).
func (e *emitter) typeDecls(spec *PackageSpec) []typeDecl {
	var decls []typeDecl
	for i, r := range e.ir.Records {
		if r.Package == spec.Name {
			decls = append(decls, func(f *jen.File, ir *IR) error { return e.record(f, ir.Records[i]) })
		}
	}
	for i, en := range e.ir.Enums {
		if en.Package == spec.Name {
			decls = append(decls, func(f *jen.File, ir *IR) error { e.enum(f, ir.Enums[i]); return nil })
		}
	}
	decls = append(decls, func(f *jen.File, ir *IR) error { e.macros(f, ir, spec); return nil })
	for i, a := range e.ir.Aliases {
		if a.Package == spec.Name {
			decls = append(decls, func(f *jen.File, ir *IR) error { e.alias(f, ir.Aliases[i]); return nil })
		}
	}
	return decls
}

// beTypes emits the big-endian integer types and their conversions.
func (e *emitter) beTypes(f *jen.File) {
	for _, c := range []string{"__be16", "__be32", "__be64"} {
		n := beTypes[c]
		bits := strings.TrimPrefix(n, "Be")
		f.Commentf("%s mirrors %s: a %s-bit value in big-endian (network) byte order.", n, c, bits)
		f.Type().Id(n).Id("uint" + bits)
		f.Line()
		f.Commentf("Native returns v in host byte order.")
		f.Func().Params(jen.Id("v").Id(n)).Id("Native").Params().Id("uint"+bits).Block(
			jen.Var().Id("b").Index(jen.Lit(mustAtoi(bits)/8)).Byte(),
			jen.Qual("encoding/binary", "BigEndian").Dot("PutUint"+bits).Call(jen.Id("b").Index(jen.Empty(), jen.Empty()), jen.Id("uint"+bits).Call(jen.Id("v"))),
			jen.Return(jen.Qual("encoding/binary", "NativeEndian").Dot("Uint"+bits).Call(jen.Id("b").Index(jen.Empty(), jen.Empty()))),
		)
		f.Line()
		f.Commentf("%s converts x from host byte order to %s.", "To"+n, n)
		f.Func().Id("To"+n).Params(jen.Id("x").Id("uint"+bits)).Id(n).Block(
			jen.Var().Id("b").Index(jen.Lit(mustAtoi(bits)/8)).Byte(),
			jen.Qual("encoding/binary", "NativeEndian").Dot("PutUint"+bits).Call(jen.Id("b").Index(jen.Empty(), jen.Empty()), jen.Id("x")),
			jen.Return(jen.Id(n).Call(jen.Qual("encoding/binary", "BigEndian").Dot("Uint"+bits).Call(jen.Id("b").Index(jen.Empty(), jen.Empty())))),
		)
		f.Line()
	}
}

// macros emits the integer macros of package spec as one constant block.
func (e *emitter) macros(f *jen.File, ir *IR, spec *PackageSpec) {
	var macros []jen.Code
	for _, m := range ir.Macros {
		if m.Package != spec.Name {
			continue
		}
		typ := sizedInt(m.Size, m.Signed)
		if m.Pointer {
			typ = "uintptr"
		}
		macros = append(macros,
			jen.Commentf("%s is %s (%s, %s).", m.GoName, m.Name, m.Pos, m.CType),
			jen.Id(m.GoName).Id(typ).Op("=").Id(literal(m.Value, m.Signed && !m.Pointer, m.Size)))
	}
	if len(macros) > 0 {
		f.Comment("Integer macros.")
		f.Const().Defs(macros...)
		f.Line()
	}
}

// alias emits a type alias for a macro renaming a tag.
func (e *emitter) alias(f *jen.File, a *Alias) {
	var target jen.Code
	var what string
	if a.Record != nil {
		target, what = jen.Qual(e.pkgPath(a.Record.Package), a.Record.GoName), a.Record.Describe()
	} else {
		target, what = jen.Qual(e.pkgPath(a.Enum.Package), a.Enum.GoName), "enum "+a.Enum.CName
	}
	f.Commentf("%s mirrors %s, which %s defines as %s.", a.GoName, a.Name, a.Pos, what)
	f.Type().Id(a.GoName).Op("=").Add(target)
	f.Line()
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// literal spells a constant's bits as a Go literal of the given signedness.
func literal(v uint64, signed bool, size int64) string {
	if signed {
		return strconv.FormatInt(signExtend(v, size), 10)
	}
	if v >= 1<<16 {
		return "0x" + strconv.FormatUint(v, 16)
	}
	return strconv.FormatUint(v, 10)
}

func signExtend(v uint64, size int64) int64 {
	shift := 64 - 8*size
	if size <= 0 || shift <= 0 {
		return int64(v)
	}
	return int64(v<<shift) >> shift
}

func (e *emitter) enum(f *jen.File, en *Enum) {
	typ := sizedInt(en.Size, en.Signed)
	if en.GoName != "" {
		f.Commentf("%s mirrors enum %s (%s).", en.GoName, en.CName, en.Pos)
		f.Type().Id(en.GoName).Id(typ)
		f.Line()
		typ = en.GoName
	}
	var defs []jen.Code
	for _, x := range en.Enumerators {
		defs = append(defs,
			jen.Commentf("%s is %s.", x.GoName, x.Name),
			jen.Id(x.GoName).Id(typ).Op("=").Id(literal(x.Value, en.Signed, en.Size)))
	}
	if en.GoName == "" {
		f.Commentf("Constants of an anonymous enum (%s).", en.Pos)
	} else {
		f.Commentf("Values of %s.", en.GoName)
	}
	f.Const().Defs(defs...)
	f.Line()
}

// checkZeroSizeEnd fails if the Go struct of r would end in the zero-size
// field last, ending at cur: Go then pads the struct (so that a pointer to
// that field never points at the next object), and C does not.
func checkZeroSizeEnd(r *Record, last *item, cur int64) error {
	if last == nil || last.typ.Size != 0 || cur != r.Size || r.Size == 0 {
		return nil
	}
	name := last.cPath
	if last.kind == itemStorage {
		name = fmt.Sprintf("(anonymous union @%d)", last.off)
	}
	return fmt.Errorf("%s: %s: member %s ends it with zero size, after which Go pads the struct (C does not): no Go layout matches",
		last.pos, r.Describe(), name)
}

// record emits the Go type of a struct or union and its accessors.
func (e *emitter) record(f *jen.File, r *Record) error {
	doc := fmt.Sprintf("%s mirrors %s (%s). Size %d, align %d.", r.GoName, r.Describe(), r.Pos, r.Size, r.Align)
	switch {
	case r.Incomplete:
		f.Commentf("%s mirrors %s (%s), which the headers declare but never define: use it only through pointers.", r.GoName, r.Describe(), r.Pos)
		f.Type().Id(r.GoName).Struct(jen.Id("_").Qual("structs", "HostLayout"))
		f.Line()
		return nil
	case r.System:
		f.Comment(doc)
		f.Comment("It is declared by the C library, not rdma-core: Go keeps it as opaque storage of the same size and alignment.")
		f.Type().Id(r.GoName).Struct(
			jen.Id("_").Qual("structs", "HostLayout"),
			jen.Id("_").Index(jen.Lit(int(r.Size/r.Align))).Id(sizedInt(r.Align, false)),
		)
		f.Line()
		return nil
	}
	items := layoutOf(r)
	if err := checkLayout(r, items); err != nil {
		return err
	}
	fields := []jen.Code{jen.Id("_").Qual("structs", "HostLayout")}
	var maxAlign int64 = 1
	for _, it := range items {
		if (it.kind == itemField || it.kind == itemStorage) && it.typ.Align > maxAlign {
			maxAlign = it.typ.Align
		}
	}
	if r.Align > maxAlign {
		// Go aligns a struct to its most aligned field: a leading zero-length
		// array raises it to C's without adding tail padding.
		fields = append(fields, jen.Id("_").Index(jen.Lit(0)).Id(sizedInt(r.Align, false)).Comment(fmt.Sprintf("align %d", r.Align)))
	}
	var cur int64
	var last *item // the last field
	for _, it := range items {
		if it.kind != itemField && it.kind != itemStorage {
			continue
		}
		last = &it
		if it.off > cur {
			fields = append(fields, jen.Id("_").Index(jen.Lit(int(it.off-cur))).Byte().Comment(fmt.Sprintf("padding @%d", cur)))
		}
		if it.off < cur {
			return fmt.Errorf("%s: %s: member %s at %d overlaps the previous one (ends at %d)", r.Pos, r.Describe(), it.cPath, it.off, cur)
		}
		comment := fmt.Sprintf("%s @%d", it.cPath, it.off)
		if it.kind == itemStorage {
			comment = fmt.Sprintf("union storage @%d, see the accessor methods", it.off)
		} else if sharers := sharersOf(items, it.cPath); sharers != "" {
			comment = fmt.Sprintf("union { %s; %s } @%d", it.cPath, sharers, it.off)
		}
		fields = append(fields, jen.Id(it.goName).Add(e.goType(it.typ)).Comment(comment))
		cur = it.off + it.typ.Size
	}
	if err := checkZeroSizeEnd(r, last, cur); err != nil {
		return err
	}
	if cur < r.Size {
		fields = append(fields, jen.Id("_").Index(jen.Lit(int(r.Size-cur))).Byte().Comment(fmt.Sprintf("padding @%d", cur)))
	}
	f.Comment(doc)
	f.Type().Id(r.GoName).Struct(fields...)
	f.Line()

	recv := jen.Id("r").Op("*").Id(r.GoName)
	for _, it := range items {
		at := jen.Qual("unsafe", "Add").Call(jen.Qual("unsafe", "Pointer").Call(jen.Id("r")), jen.Lit(int(it.off)))
		switch it.kind {
		case itemAccessor:
			what := fmt.Sprintf("member %s", it.cPath)
			if it.shares != "" {
				what += fmt.Sprintf(", which shares its storage with %s", it.shares)
			} else {
				what += ", a member of a union"
			}
			f.Commentf("%s returns a pointer to %s (@%d).", it.goName, what, it.off)
			f.Func().Params(recv.Clone()).Id(it.goName).Params().Op("*").Add(e.goType(it.typ)).Block(
				jen.Return(jen.Parens(jen.Op("*").Add(e.goType(it.typ))).Call(at)))
			f.Line()
		case itemFlex:
			f.Commentf("%s returns the flexible array member %s (@%d) as a slice of n elements.", it.goName, it.cPath, it.off)
			f.Comment("The caller guarantees that the memory behind r holds them.")
			f.Func().Params(recv.Clone()).Id(it.goName).Params(jen.Id("n").Int()).Index().Add(e.goType(it.typ)).Block(
				jen.Return(jen.Qual("unsafe", "Slice").Call(jen.Parens(jen.Op("*").Add(e.goType(it.typ))).Call(at), jen.Id("n"))))
			f.Line()
		}
	}
	return nil
}

// sharersOf lists the union members that share storage with the field cPath.
func sharersOf(items []item, cPath string) string {
	var s []string
	for _, it := range items {
		if it.kind == itemAccessor && it.shares == cPath {
			s = append(s, it.cPath)
		}
	}
	return strings.Join(s, "; ")
}

// cgoType is the cgo spelling of a C type (C.uint, *C.struct_ibv_qp, ...).
func cgoType(t *Type) jen.Code {
	switch t.Kind {
	case KInt, KFloat:
		if t.Typedef != "" {
			return jen.Qual("C", t.Typedef)
		}
		return jen.Qual("C", t.CBase)
	case KEnum:
		if t.Typedef != "" {
			return jen.Qual("C", t.Typedef)
		}
		return jen.Qual("C", "enum_"+t.Enum.CName)
	case KRecord:
		if t.Record.Typedef {
			return jen.Qual("C", t.Record.CName)
		}
		return jen.Qual("C", t.Record.Keyword()+"_"+t.Record.CName)
	case KPointer:
		if t.Elem.Kind == KVoid {
			return jen.Qual("unsafe", "Pointer")
		}
		return jen.Op("*").Add(cgoType(t.Elem))
	case KFuncPtr:
		if t.Typedef != "" {
			// cgo names a typedef'd function pointer: a pointer to one is
			// *C.ibv_qp_reader, which **[0]byte is not.
			return jen.Qual("C", t.Typedef)
		}
		return jen.Op("*").Index(jen.Lit(0)).Byte()
	case KArray:
		// Only behind a pointer (parameters decay): int (*)[4] is *[4]C.int.
		return jen.Index(jen.Lit(int(t.Len))).Add(cgoType(t.Elem))
	}
	panic(fmt.Sprintf("cgoType: kind %d", t.Kind))
}

// cDecl spells a C declaration of name with type t from the IR, which
// records no qualifiers: for messages, and for a preamble wrapper whose
// header does not spell the declaration itself (wrapperDecl).
// name is a declarator: a function's is its name and parameter list, so
// that a result type such as int (*)[4] wraps around both.
func cDecl(t *Type, name string) string {
	var base string
	switch t.Kind {
	case KVoid:
		base = "void"
	case KInt, KFloat:
		base = t.Typedef
		if base == "" {
			base = cSpelling[t.CBase]
		}
	case KEnum:
		base = t.Typedef
		if base == "" {
			base = "enum " + t.Enum.CName
		}
	case KRecord:
		base = t.Record.CType()
	case KPointer:
		if reachesFuncPtr(t) {
			// int (**)(int) has no spelling here (the IR keeps no
			// signature); void * converts to it implicitly, void ** would not.
			return "void *" + name
		}
		return cDecl(t.Elem, "*"+name)
	case KArray:
		// Reached through a pointer only: int (*a)[4], not int *a[4].
		if strings.HasPrefix(name, "*") {
			name = "(" + name + ")"
		}
		return cDecl(t.Elem, fmt.Sprintf("%s[%d]", name, t.Len))
	case KFuncPtr:
		base = "void *"
	}
	return strings.TrimSpace(base + " " + name)
}

// wrapperDecl declares name with type t in a C wrapper of the preamble:
// as the header spells it (s), so that every const of the function's own
// declaration is kept, or from the IR (cDecl) where the header does not
// spell it itself. A function pointer, or a pointer to one, is void *
// either way: the stub passes it as an unsafe.Pointer (see stub).
func wrapperDecl(t *Type, s Spelling, name string) string {
	if s.Before == "" || reachesFuncPtr(t) {
		return cDecl(t, name)
	}
	return s.Around(name)
}

// reachesFuncPtr reports whether t is a function pointer or a pointer to
// one, through any number of pointers: a C wrapper (see cDecl) declares
// such a parameter or result void *, which cgo calls unsafe.Pointer.
func reachesFuncPtr(t *Type) bool {
	for ; t != nil; t = t.Elem {
		switch t.Kind {
		case KFuncPtr:
			return true
		case KPointer:
		default:
			return false
		}
	}
	return false
}

var cSpelling = map[string]string{
	"_Bool": "_Bool", "char": "char", "schar": "signed char", "uchar": "unsigned char",
	"short": "short", "ushort": "unsigned short", "int": "int", "uint": "unsigned int",
	"long": "long", "ulong": "unsigned long", "longlong": "long long", "ulonglong": "unsigned long long",
	"float": "float", "double": "double",
}

// funcsFile emits the cgo stubs of one package.
func (e *emitter) funcsFile(spec *PackageSpec) (File, error) {
	f := jen.NewFilePathName(e.pkgPath(spec.Name), spec.Name)
	e.header(f)
	lib := "no library"
	if spec.Library.Soname != "" {
		lib = spec.Library.Soname + ", opened with dlopen on first use (Load)"
	}
	for _, line := range strings.Split(wrapComment(fmt.Sprintf("Package %s is rdma-core's %s as Go, generated by verbsgen: "+
		"every struct laid out as C lays it out, every enum and integer macro a typed constant, and a stub for "+
		"every function, static inline functions and function-like macros included. Its functions come from %s.", spec.Name,
		strings.Join(spec.Includes, " and "), lib)), "\n") {
		f.PackageComment(line)
	}
	f.PackageComment("")
	for _, line := range strings.Split(wrapComment("Each stub returns what its C function's error convention calls for "+
		"(gen.Conventions): a pointer and an error, an error, a count and an error, or the C value of a function "+
		"that cannot fail (with an error too when an older pinned rdma-core release lacks it). Its doc comment says which. The error is a *verberr.Error naming the C function "+
		"and its errno (errors.Is(err, syscall.EINVAL)); a failure seen before costs no allocation."), "\n") {
		f.PackageComment(line)
	}
	funcs := e.funcsOf(spec)
	pointerRules(f, spec, funcs)
	var pre strings.Builder
	incDir := ""
	if e.opt.IncludeDir != "" {
		incDir = path.Join("..", e.opt.IncludeDir)
		pre.WriteString(cflags(incDir))
	}
	if spec.Library.Soname != "" {
		// dlopen lives in libdl before glibc 2.34 and in libc after it.
		pre.WriteString("#cgo LDFLAGS: -ldl\n")
	}
	var dataPath []string
	for _, fn := range funcs {
		if spec.isDataPath(fn.Name) && takesPointer(fn) {
			dataPath = append(dataPath, spec.cName(fn))
		}
	}
	sort.Strings(dataPath)
	for _, n := range dataPath {
		// The data path keeps its pointer arguments on the Go stack:
		// these functions neither retain them nor call back into Go.
		// Its pointers reach C unchecked (emit_unchecked.go) but as
		// pointers, which escape like any other without both
		// directives: cgo honours noescape only together with
		// nocallback, and without them a local passed by address (the
		// bad_wr slot of verbs.PostRecv) costs an allocation per call.
		// nocallback's own cost, 2-3 ns a call, is what the generated
		// data path pays over an entry point that takes uintptr_t
		// (hand's), which cannot take a pointer to a local: a stack
		// that moves before the call reaches C leaves that address
		// naming the old stack (hand's
		// TestGeneratedLocalSlotArrivesWhenTheStackMoves). A function
		// that takes no pointer gets neither.
		fmt.Fprintf(&pre, "#cgo noescape %s\n#cgo nocallback %s\n", n, n)
	}
	pre.WriteString(e.preamblePragmas())
	for _, inc := range spec.Includes {
		pre.WriteString(includeLine(incDir, inc))
	}
	for _, fn := range funcs {
		if fn.Convention == GetaddrinfoCode {
			// EAI_SYSTEM and gai_strerror.
			pre.WriteString("#include <netdb.h>\n")
			break
		}
	}
	pre.WriteString(e.layoutAssertions(spec))
	pre.WriteString(e.loaderDecls(spec))
	for _, fn := range funcs {
		if spec.hasUnchecked(fn) {
			pre.WriteString(uncheckedTypedef)
			break
		}
	}
	copiers := false
	for _, fn := range funcs {
		if !spec.wrapped(fn) {
			continue
		}
		// cgo cannot call a function-like macro: a static inline wrapper
		// expands it, so C's compile-time choices still apply. A wrapper
		// takes an unchecked pointer as a goverbs_unchecked * and casts it
		// back (emit_unchecked.go).
		var params, args []string
		for i, p := range fn.Params {
			name := wrapperParamName(p, i)
			if spec.unchecked(fn, p) {
				params = append(params, uncheckedType+" *"+name)
				args = append(args, "("+castType(p)+")"+name)
				continue
			}
			params = append(params, wrapperDecl(p.Type, p.Spelling, name))
			args = append(args, name)
		}
		decl := wrapperDecl(fn.Result, fn.ResultSpelling, spec.cName(fn)+"("+strings.Join(params, ", ")+")")
		call := fmt.Sprintf("%s(%s)", fn.Name, strings.Join(args, ", "))
		if reachesFuncPtr(fn.Result) {
			// Declared void * (cDecl): the cast drops a const of the
			// function's own result type (const ibv_qp_reader *), as
			// cgo does anyway, without the warning an implicit
			// conversion gets (discarded qualifiers).
			call = "(void *)(" + call + ")"
		}
		if !copiesErrno(fn) {
			ret := "return "
			if fn.Result.Kind == KVoid {
				ret = ""
			}
			fmt.Fprintf(&pre, "static inline %s { %s%s; }\n", decl, ret, call)
			continue
		}
		// See ErrnoCopiers: errno made positive before cgo reads it.
		if !copiers {
			copiers = true
			fmt.Fprintf(&pre, "// The wrappers below make errno positive where %s left a provider's\n"+
				"// -errno in it: cgo would box an errno of 256 and up at every failed call.\n", strings.Join(ErrnoCopiers, " or "))
		}
		fmt.Fprintf(&pre, "static inline %s { %s = %s; if (errno < 0) errno = -errno; return goverbs_r; }\n",
			decl, wrapperDecl(fn.Result, fn.ResultSpelling, "goverbs_r"), call)
	}
	f.CgoPreamble(pre.String())
	e.loaderAPI(f, spec)
	newer := e.newerExterns(spec)
	e.sites(f, spec, funcs, newer)
	for _, fn := range funcs {
		if err := e.stub(f, spec, fn, newer); err != nil {
			return File{}, err
		}
	}
	return render(path.Join(spec.Name, "z"+spec.Name+"_funcs.go"), f)
}

// funcsOf lists the functions package spec declares, in IR order.
func (e *emitter) funcsOf(spec *PackageSpec) []*Func {
	var funcs []*Func
	for _, fn := range e.ir.Funcs {
		if fn.Package == spec.Name {
			funcs = append(funcs, fn)
		}
	}
	return funcs
}

// includeRoot splits rel, the include directory relative to the package's
// own directory, into the directory the preamble puts on the include path
// and the last (up to two) components of rel, which the preamble's
// includes name: "../../headers/vendored/include" gives "../../headers" and
// "vendored/include", so verbs.h is included as
// "vendored/include/infiniband/verbs.h".
//
// Why: cmd/go puts CGO_CFLAGS and CGO_CPPFLAGS before a package's own
// #cgo CFLAGS, and GCC searches CPATH and C_INCLUDE_PATH before the
// system's directories, so a site's -I/opt/ofed/include would win over any
// -I of ours for #include <infiniband/verbs.h>, and the package would
// compile against headers it was not generated from. A site directory
// holding vendored/include/infiniband/verbs.h is not a thing, so the roots
// are found where the package says; and the roots include the rest of the
// set quoted and relative to themselves (headers/vendor.sh rewrites the
// vendored copies so; a user's own set needs the same), which GCC looks
// up in the including file's own directory before any -I. (-iquote would
// say it more directly, but cmd/go refuses it in #cgo CFLAGS.)
//
// sub is "" when rel ends in ".." or "." and names no directory: the
// preamble then falls back to -I rel and #include <...>.
func includeRoot(rel string) (dir, sub string) {
	parts := strings.Split(path.Clean(rel), "/")
	i := len(parts)
	for i > 0 && len(parts)-i < 2 && parts[i-1] != ".." && parts[i-1] != "." {
		i--
	}
	return path.Join(parts[:i]...), path.Join(parts[i:]...)
}

// cflags is the #cgo CFLAGS line that makes the package reach the headers
// of the include directory rel (relative to the package's own directory):
// the directory of includeRoot, for the roots, then rel itself, for a
// header set whose headers include each other by <...> (a user's copy of
// /usr/include's, unlike goverbs' vendored set, which vendor.sh rewrote):
// those follow any -I of CGO_CFLAGS, as they always did.
func cflags(rel string) string {
	if rel == "" {
		return ""
	}
	var fl []string
	for _, f := range includeFlags(rel) {
		fl = append(fl, "-I${SRCDIR}/"+strings.TrimPrefix(f, "-I"))
	}
	return "#cgo CFLAGS: " + strings.Join(fl, " ") + "\n"
}

// includeFlags are cflags's -I flags, relative to the package's directory.
func includeFlags(rel string) []string {
	dir, sub := includeRoot(rel)
	if sub == "" {
		return []string{"-I" + rel}
	}
	return []string{"-I" + dir, "-I" + rel}
}

// includeLine includes the root header inc of the include directory rel
// (relative to the package's own directory; "" when the build's flags
// provide it): by a path below cflags's directory when rel names one, else
// from the include path.
func includeLine(rel, inc string) string {
	if rel != "" {
		if _, sub := includeRoot(rel); sub != "" {
			return "#include \"" + path.Join(sub, inc) + "\"\n"
		}
	}
	return "#include <" + inc + ">\n"
}

// layoutAssertions are C static assertions of the size, alignment and every
// member offset the Go side relies on, for each record the package declares:
// compiled against headers whose layouts differ from the ones the package was
// generated from, the package fails to build, naming the fact that changed,
// instead of corrupting memory at run time. At run time they cost nothing.
func (e *emitter) layoutAssertions(spec *PackageSpec) string {
	var b strings.Builder
	v := e.ir.Version
	if v == "" {
		v = "an unknown version"
	}
	fmt.Fprintf(&b, "\n// Layout proof: each line fails the build if these headers disagree with\n// the layout the Go types of package %s were generated with.\n", spec.Name)
	fmt.Fprintf(&b, "#define GOVERBS_LAYOUT(cond, what) _Static_assert(cond, \"goverbs: \" what \" differs from rdma-core %s, which package %s was generated from: regenerate it for these headers (go generate, or verbsgen -headers /usr/include)\")\n", v, spec.Name)
	if e.irs == nil {
		t := e.opt.Target
		if t.Define != "" {
			fmt.Fprintf(&b, "#if defined(%s)\n", t.Define)
		}
		n := 0
		for _, r := range e.ir.Records {
			if r.Package == spec.Name {
				n += recordAssertions(&b, r)
			}
		}
		fmt.Fprintf(&b, "// %d layout assertions.\n", n)
		if t.Define != "" {
			b.WriteString(otherArchError(spec.Name, []string{t.Name()}))
		}
		b.WriteString("#undef GOVERBS_LAYOUT\n\n")
		return b.String()
	}
	// Several targets: a record's assertions are common if they are the
	// same text on every architecture, else they go in its #if block.
	n := 0
	arch := make([]strings.Builder, len(e.irs))
	archN := make([]int, len(e.irs))
	for i, r := range e.irs[0].Records {
		if r.Package != spec.Name {
			continue
		}
		texts := make([]strings.Builder, len(e.irs))
		counts := make([]int, len(e.irs))
		same := true
		for k, ir := range e.irs {
			counts[k] = recordAssertions(&texts[k], ir.Records[i])
			same = same && texts[k].String() == texts[0].String()
		}
		if same {
			b.WriteString(texts[0].String())
			n += counts[0]
			continue
		}
		for k := range e.irs {
			arch[k].WriteString(texts[k].String())
			archN[k] += counts[k]
		}
	}
	fmt.Fprintf(&b, "// %d layout assertions common to", n)
	for _, t := range e.targets {
		fmt.Fprintf(&b, " %s", t.Name())
	}
	b.WriteString(".\n")
	for k, t := range e.targets {
		kw := "#elif"
		if k == 0 {
			kw = "#if"
		}
		fmt.Fprintf(&b, "%s defined(%s)\n%s// %d layout assertions for %s.\n", kw, t.Define, arch[k].String(), archN[k], t.Name())
	}
	var names []string
	for _, t := range e.targets {
		names = append(names, t.Name())
	}
	b.WriteString(otherArchError(spec.Name, names))
	b.WriteString("#undef GOVERBS_LAYOUT\n\n")
	return b.String()
}

// otherArchError closes the #if of the layout assertions with the error a
// build for an architecture the package was not laid out for gets, and, if
// verbsgen knows more architectures than names, how to lay them out too.
func otherArchError(pkg string, names []string) string {
	var all []string
	for n := range Targets {
		all = append(all, n)
	}
	sort.Strings(all)
	hint := ""
	if len(names) < len(all) {
		hint = fmt.Sprintf(": regenerate it with verbsgen -targets %s", strings.Join(all, ","))
	}
	return fmt.Sprintf("#else\n#error \"goverbs: package %s has layouts for %s only%s\"\n#endif\n", pkg, strings.Join(names, ", "), hint)
}

// recordAssertions writes the layout assertions of r (none for an
// incomplete record) and returns how many.
func recordAssertions(b *strings.Builder, r *Record) int {
	if r.Incomplete {
		return 0
	}
	ct := r.CType()
	fmt.Fprintf(b, "GOVERBS_LAYOUT(sizeof(%s) == %d, \"sizeof(%s)\");\n", ct, r.Size, ct)
	fmt.Fprintf(b, "GOVERBS_LAYOUT(_Alignof(%s) == %d, \"_Alignof(%s)\");\n", ct, r.Align, ct)
	n := 2
	if r.System {
		return n
	}
	for _, it := range layoutOf(r) {
		if it.kind == itemStorage {
			continue
		}
		b.WriteString(memberAssertion(ct, it))
		n++
	}
	return n
}

// memberAssertion is the one assertion of a member: its offset, its size
// (for an array, its element's too) and, for an integer or enum, its
// signedness, so that a member retyped at the same offset also fails the
// build. One line a member keeps the preamble as long as offsets alone made
// it; the message says what the Go side expects.
func memberAssertion(ct string, it item) string {
	mt := memberTypeOf(it)
	conds := []string{fmt.Sprintf("__builtin_offsetof(%s, %s) == %d", ct, it.cPath, it.off)}
	var want []string
	if !mt.flex {
		conds = append(conds, fmt.Sprintf("sizeof(%s) == %d", mt.cMember(ct, it.cPath), mt.size))
		want = append(want, fmt.Sprintf("size %d", mt.size))
	}
	if mt.dims > 0 {
		conds = append(conds, fmt.Sprintf("sizeof(%s) == %d", mt.cElem(ct, it.cPath), mt.elem.Size))
		want = append(want, fmt.Sprintf("element size %d", mt.elem.Size))
	}
	if mt.hasSign() {
		conds = append(conds, fmt.Sprintf("((__typeof__(%s))-1 < 0) == %d", mt.cElem(ct, it.cPath), cBool(mt.elem.Signed)))
		want = append(want, map[bool]string{true: "signed", false: "unsigned"}[mt.elem.Signed])
	}
	return fmt.Sprintf("GOVERBS_LAYOUT(%s, \"%s member %s (offset %d, %s)\");\n",
		strings.Join(conds, " && "), ct, it.cPath, it.off, strings.Join(want, ", "))
}

func cBool(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *PackageSpec) isDataPath(name string) bool {
	for _, p := range s.DataPath {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// verberrPath is the package whose errors the stubs return.
const verberrPath = "github.com/goverbs/goverbs/verberr"

// siteName is the package variable holding fn's verberr.Site.
func siteName(fn *Func) string { return "site" + fn.GoName }

// sites emits the verberr.Site of every function of the package that can
// fail, a function that cannot but that an older release lacks (newer)
// included, and the helpers the stubs share.
func (e *emitter) sites(f *jen.File, spec *PackageSpec, funcs []*Func, newer map[string]newerExtern) {
	ext := map[string]bool{}
	loader := spec.Library.Soname != "" && len(e.externsOf(spec)) > 0
	if loader {
		for _, fn := range e.externsOf(spec) {
			ext[fn.Name] = true
		}
	}
	var defs []jen.Code
	for _, fn := range funcs {
		if fn.Convention == Unassigned || fn.Convention == CannotFail && len(newerThanOldest(fn, newer)) == 0 {
			continue
		}
		avail := jen.Nil()
		if loader {
			// The externs whose absence would explain an ENOSYS.
			var names []jen.Code
			for _, n := range externsBehind(fn) {
				if ext[n] {
					names = append(names, jen.Lit(n))
				}
			}
			avail = jen.Id("availability").Call(names...)
		}
		site := jen.Qual(verberrPath, "NewSite").Call(jen.Lit(fn.Name), avail)
		if nr := fn.NoRDMA; nr != nil {
			site = site.Dot("NoRDMA").Call(jen.Qual("syscall", errnoNames[nr.Errno]), jen.Lit(nr.Says))
		}
		defs = append(defs, jen.Id(siteName(fn)).Op("=").Add(site))
	}
	if len(defs) == 0 {
		return
	}
	f.Comment("The sites the stubs' errors come from: one per C function that can fail, or")
	f.Comment("that cannot but that an older pinned release lacks.")
	f.Var().Defs(defs...)
	f.Line()
	if loader {
		f.Comment("availability reports why the externs named cannot be called (the library or one of them")
		f.Comment("is missing), or nil: what an ENOSYS from a stub that calls them is explained by.")
		f.Func().Id("availability").Params(jen.Id("externs").Op("...").String()).Func().Params().Error().Block(
			jen.Return(jen.Func().Params().Error().Block(
				jen.If(jen.Id("err").Op(":=").Id("Load").Call(), jen.Id("err").Op("!=").Nil()).Block(jen.Return(jen.Id("err"))),
				jen.For(jen.List(jen.Id("_"), jen.Id("n")).Op(":=").Range().Id("externs")).Block(
					jen.If(jen.Id("err").Op(":=").Id("Available").Call(jen.Id("n")), jen.Id("err").Op("!=").Nil()).Block(jen.Return(jen.Id("err")))),
				jen.Return(jen.Nil()))))
		f.Line()
	}
}

// A newerExtern is an extern function of the package's library that the
// oldest release in EmitOptions.Since lacks: the extern's C name and the
// first pinned release with it, empty when no pinned release declares it.
type newerExtern struct{ name, since string }

// newerExterns maps each extern of spec's library that the oldest pinned
// release lacks (a later one declares it, or none does) to what
// newerExtern says of it; nil without a loader or without a Since table.
func (e *emitter) newerExterns(spec *PackageSpec) map[string]newerExtern {
	if spec.Library.Soname == "" || e.opt.Since == nil {
		return nil
	}
	oldest := ""
	for _, v := range e.opt.Since {
		if oldest == "" || versionLess(v, oldest) {
			oldest = v
		}
	}
	newer := map[string]newerExtern{}
	for _, fn := range e.externsOf(spec) {
		if v, ok := e.opt.Since[fn.Name]; !ok || v != oldest {
			newer[fn.Name] = newerExtern{fn.Name, v}
		}
	}
	return newer
}

// externsBehind lists, once each, the names an extern that fn calls may
// have: fn's own, what a macro expands to, the "_name" extern an inline of
// the same name wraps, and whatever an inline's body calls (the caller
// keeps those that are externs).
func externsBehind(fn *Func) []string {
	names := []string{fn.Name, "_" + fn.Name}
	if fn.Target != "" {
		names = append(names, fn.Target, "_"+fn.Target)
	}
	var once []string
	for _, n := range append(names, fn.Calls...) {
		if !slices.Contains(once, n) {
			once = append(once, n)
		}
	}
	return once
}

// newerThanOldest returns the externs behind fn that an older pinned
// release lacks, in externsBehind's order.
func newerThanOldest(fn *Func, newer map[string]newerExtern) []newerExtern {
	var xs []newerExtern
	for _, n := range externsBehind(fn) {
		if x, ok := newer[n]; ok {
			xs = append(xs, x)
		}
	}
	return xs
}

// stub emits one Go function calling a C function through cgo, with the
// signature its error convention gives (see Convention). No cgo type
// appears in its signature. A function that cannot fail but that an older
// pinned release lacks (newer) gets an error result too: without it, a
// library that lacks the function would answer a plausible zero.
func (e *emitter) stub(f *jen.File, spec *PackageSpec, fn *Func, newer map[string]newerExtern) error {
	// A C wrapper of the preamble (cDecl) takes void * for a function
	// pointer, or a pointer to one, where the C function takes its type.
	wrapped := spec.wrapped(fn)
	var params, args []jen.Code
	for _, p := range fn.Params {
		params = append(params, jen.Id(p.GoName).Add(e.goParamType(p.Type)))
		switch {
		case spec.unchecked(fn, p):
			// See emit_unchecked.go.
			ptr := jen.Id(p.GoName)
			if p.Type.Elem.Kind != KVoid {
				ptr = jen.Qual("unsafe", "Pointer").Call(ptr)
			}
			args = append(args, jen.Parens(jen.Op("*").Qual("C", uncheckedType)).Call(ptr))
		case wrapped && (p.Type.Kind == KFuncPtr || p.Type.Kind == KPointer && p.Type.Elem.Kind == KFuncPtr):
			args = append(args, jen.Id(p.GoName)) // already an unsafe.Pointer (goParamType)
		case wrapped && reachesFuncPtr(p.Type):
			args = append(args, jen.Qual("unsafe", "Pointer").Call(jen.Id(p.GoName)))
		default:
			args = append(args, toC(p.Type, jen.Id(p.GoName)))
		}
	}
	call := jen.Qual("C", spec.cName(fn)).Call(args...)
	res := fn.Result
	// value converts the C result r to the stub's Go result type.
	value := func() jen.Code {
		r := jen.Id("r")
		switch {
		case res.Kind == KRecord:
			return jen.Op("*").Parens(jen.Op("*").Add(e.goType(res))).Call(jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Id("r")))
		case res.Kind == KPointer && (res.Elem.Kind == KVoid || res.Elem.Kind == KFuncPtr), res.Kind == KFuncPtr:
			return jen.Qual("unsafe", "Pointer").Call(r)
		case res.Kind == KPointer:
			return jen.Parens(e.goType(res)).Call(jen.Qual("unsafe", "Pointer").Call(r))
		}
		return jen.Add(e.goType(res)).Call(r)
	}
	site := jen.Id(siteName(fn))
	var body []jen.Code
	var results []jen.Code
	doc := conventionDoc(fn)
	switch fn.Convention {
	case CannotFail:
		if xs := newerThanOldest(fn, newer); len(xs) > 0 {
			var lacks, undated []string
			var names []jen.Code
			for _, x := range xs {
				if x.since == "" {
					undated = append(undated, x.name)
				} else {
					lacks = append(lacks, fmt.Sprintf("before %s lack %s", x.since, x.name))
				}
				names = append(names, jen.Lit(x.name))
			}
			var clauses []string
			if len(lacks) > 0 {
				clauses = append(clauses, "rdma-core releases "+strings.Join(lacks, ", and "))
			}
			if len(undated) > 0 {
				clauses = append(clauses, "no rdma-core release goverbs pins declares "+strings.Join(undated, " or "))
			}
			when := "does" // lacks what those releases lack
			switch {
			case len(undated) > 0 && len(names) > 1:
				when = "lacks one"
			case len(undated) > 0:
				when = "lacks it"
			}
			doc = fmt.Sprintf("It cannot fail once called, but %s: "+
				"when the loaded library %s, it calls nothing and returns a *verberr.Error naming %s, "+
				"ENOSYS with Available's error (error convention %q, rule %q).",
				strings.Join(clauses, ", and "), when, fn.Name, fn.Convention, fn.ConventionRule)
			// fail returns the site's ENOSYS, which carries Available's
			// error, for a missing extern.
			enosys := site.Clone().Dot("Err").Call(jen.Qual("syscall", "ENOSYS"))
			fail := func(ret ...jen.Code) jen.Code {
				if len(names) == 1 {
					return jen.If(jen.Id("Available").Call(names[0]).Op("!=").Nil()).Block(ret...)
				}
				return jen.For(jen.List(jen.Id("_"), jen.Id("n")).Op(":=").Range().Index().String().Values(names...)).Block(
					jen.If(jen.Id("Available").Call(jen.Id("n")).Op("!=").Nil()).Block(ret...))
			}
			if res.Kind == KVoid {
				body = append(body, fail(jen.Return(enosys)), call, jen.Return(jen.Nil()))
				results = append(results, jen.Error())
				break
			}
			body = append(body,
				fail(jen.Var().Id("zero").Add(e.goParamType(res)), jen.Return(jen.Id("zero"), enosys)),
				jen.Id("r").Op(":=").Add(call),
				jen.Return(value(), jen.Nil()))
			results = append(results, e.goParamType(res), jen.Error())
			break
		}
		if res.Kind == KVoid {
			body = append(body, call)
			break
		}
		body = append(body, jen.Id("r").Op(":=").Add(call), jen.Return(value()))
		results = append(results, e.goParamType(res))
	case NullErrno:
		body = append(body,
			jen.List(jen.Id("r"), jen.Id("err")).Op(":=").Add(call),
			jen.If(jen.Id("r").Op("==").Nil()).Block(jen.Return(jen.Nil(), site.Clone().Dot("Failed").Call(jen.Id("err"), jen.Lit(-1)))),
			jen.Return(value(), jen.Nil()))
		results = append(results, e.goParamType(res), jen.Error())
	case ErrnoResult:
		fail := site.Clone().Dot("Failed").Call(jen.Nil(), jen.Int64().Call(jen.Id("r")))
		if fn.NegativeCode {
			fail = site.Clone().Dot("ProviderCode").Call(jen.Int64().Call(jen.Id("r")))
		}
		body = append(body,
			jen.Id("r").Op(":=").Add(call),
			jen.If(jen.Id("r").Op("==").Lit(0)).Block(jen.Return(jen.Nil())),
			jen.Return(fail))
		results = append(results, jen.Error())
	case MinusOneErrno:
		fail := "Failed"
		if fn.NegativeCode {
			fail = "CodeAndErrno"
		}
		body = append(body,
			jen.List(jen.Id("r"), jen.Id("err")).Op(":=").Add(call),
			jen.If(jen.Id("r").Op("==").Lit(0)).Block(jen.Return(jen.Nil())),
			jen.Return(site.Clone().Dot(fail).Call(jen.Id("err"), jen.Int64().Call(jen.Id("r")))))
		results = append(results, jen.Error())
	case CountOrError:
		if fn.NegativeCode {
			// A provider's code, no errno to read.
			body = append(body,
				jen.Id("r").Op(":=").Add(call),
				jen.If(jen.Id("r").Op(">=").Lit(0)).Block(jen.Return(jen.Int().Call(jen.Id("r")), jen.Nil())),
				jen.Return(jen.Lit(0), site.Clone().Dot("ProviderCode").Call(jen.Int64().Call(jen.Id("r")))))
		} else {
			body = append(body,
				jen.List(jen.Id("r"), jen.Id("err")).Op(":=").Add(call),
				jen.If(jen.Id("r").Op(">=").Lit(0)).Block(jen.Return(jen.Int().Call(jen.Id("r")), jen.Nil())))
			if fn.Unsupported != "" {
				body = append(body, jen.If(jen.Id("r").Op("==").Lit(-1)).Block(
					jen.Return(jen.Lit(0), site.Clone().Dot("Unsupported").Call(jen.Id("err"), jen.Lit(fn.Unsupported)))))
			}
			body = append(body,
				jen.Return(jen.Lit(0), site.Clone().Dot("Failed").Call(jen.Id("err"), jen.Int64().Call(jen.Id("r")))))
		}
		results = append(results, jen.Int(), jen.Error())
	case GetaddrinfoCode:
		body = append(body,
			jen.List(jen.Id("r"), jen.Id("err")).Op(":=").Add(call),
			jen.If(jen.Id("r").Op("==").Lit(0)).Block(jen.Return(jen.Nil())),
			jen.Comment("-1 and EAI_SYSTEM mean \"see errno\"; EAI_BADFLAGS is -1 too, told apart by errno 0."),
			jen.If(jen.List(jen.Id("errno"), jen.Id("_")).Op(":=").Id("err").Assert(jen.Qual("syscall", "Errno")),
				jen.Id("errno").Op("!=").Lit(0).Op("&&").Parens(jen.Id("r").Op("==").Lit(-1).Op("||").Id("r").Op("==").Qual("C", "EAI_SYSTEM"))).Block(
				jen.Return(site.Clone().Dot("Err").Call(jen.Id("errno")))),
			jen.Return(jen.Op("&").Qual(verberrPath, "GAIError").Values(jen.Dict{
				jen.Id("Func"):    jen.Lit(fn.Name),
				jen.Id("Code"):    jen.Int().Call(jen.Id("r")),
				jen.Id("Message"): jen.Qual("C", "GoString").Call(jen.Qual("C", "gai_strerror").Call(jen.Id("r"))),
			})))
		results = append(results, jen.Error())
	default:
		return fmt.Errorf("%s: %s has no error convention", fn.Pos, fn.Name)
	}
	how := fn.Kind.String()
	if fn.Kind == FuncMacro {
		how += " expanding to " + fn.Target
	}
	for _, line := range strings.Split(wrapComment(fmt.Sprintf("%s calls %s (%s, %s). %s", fn.GoName, fn.Name, how, fn.Pos, doc)), "\n") {
		f.Comment(line)
	}
	sig := f.Func().Id(fn.GoName).Params(params...)
	switch len(results) {
	case 0:
	case 1:
		sig.Add(results[0])
	default:
		sig.Parens(jen.List(results...))
	}
	sig.Block(body...)
	f.Line()
	return nil
}

// wrapComment breaks text into lines of at most about 80 columns.
func wrapComment(text string) string { return wrapWidth(text, 77) }

// wrapWidth breaks text into lines of at most about width columns.
func wrapWidth(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// conventionDoc is the part of a stub's doc comment that says how it fails,
// and what a NoRDMA failure means.
func conventionDoc(fn *Func) string {
	doc := conventionOnly(fn)
	if nr := fn.NoRDMA; nr != nil {
		doc += fmt.Sprintf(" Its %s, when the loaded library has the function, means %q: the error then also matches verberr.ErrNoRDMA.",
			errnoNames[nr.Errno], nr.Says)
	}
	return doc
}

// conventionOnly is conventionDoc without what NoRDMA adds.
func conventionOnly(fn *Func) string {
	rule := fmt.Sprintf(" (error convention %q, rule %q)", fn.Convention, fn.ConventionRule)
	switch fn.Convention {
	case CannotFail:
		return "It cannot fail: what C returns is the result" + rule + "."
	case NullErrno:
		return "When C returns NULL, it returns nil and a *verberr.Error with the errno C set" + rule + "."
	case ErrnoResult:
		if fn.NegativeCode {
			return "When C returns an errno, it returns it as a *verberr.Error; a negative value is the provider's own code, " +
				"not an errno: a *verberr.Error whose Code it is, matching no errno" + rule + "."
		}
		return "When C returns an errno, it returns it as a *verberr.Error" + rule + "."
	case MinusOneErrno:
		if fn.NegativeCode {
			return "When C returns a negative code of its own, it returns a *verberr.Error with the errno C set, " +
				"whose Code it is" + rule + "."
		}
		return "When C returns -1, it returns a *verberr.Error with the errno C set" + rule + "."
	case CountOrError:
		if fn.NegativeCode {
			return "It returns C's count; when C returns a negative value, the provider's own code, not an errno: " +
				"0 and a *verberr.Error whose Code it is, matching no errno" + rule + "."
		}
		if fn.Unsupported != "" {
			return "It returns C's count; when C returns -1, which says that " + fn.Unsupported + ", 0 and a *verberr.Error " +
				"matching EOPNOTSUPP that says so; another negative value, 0 and a *verberr.Error with the errno" + rule + "."
		}
		return "It returns C's count; when C returns a negative value, 0 and a *verberr.Error with the errno" + rule + "."
	case GetaddrinfoCode:
		return "When C fails, it returns a *verberr.Error for an errno or a *verberr.GAIError for a getaddrinfo code" + rule + "."
	}
	return ""
}

// goParamType is the Go type of a parameter or result: like goType, but a
// function pointer is an unsafe.Pointer (it is passed, never stored).
func (e *emitter) goParamType(t *Type) jen.Code {
	if t.Kind == KFuncPtr {
		return jen.Qual("unsafe", "Pointer")
	}
	return e.goType(t)
}

// toC converts a Go argument to the cgo type of the C parameter.
func toC(t *Type, v *jen.Statement) jen.Code {
	switch t.Kind {
	case KPointer:
		if t.Elem.Kind == KVoid {
			return v
		}
		return jen.Parens(cgoType(t)).Call(jen.Qual("unsafe", "Pointer").Call(v))
	case KFuncPtr:
		return jen.Parens(cgoType(t)).Call(v)
	case KRecord:
		return jen.Op("*").Parens(jen.Op("*").Add(cgoType(t))).Call(jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Add(v)))
	default:
		return jen.Add(cgoType(t)).Call(v)
	}
}
