package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

const layoutcheckPath = "github.com/goverbs/goverbs/tests/layoutcheck"

// layoutRow is one fact of the layout test: its key, the C expression gcc
// evaluates and the Go expression that should equal it.
type layoutRow struct {
	key   string
	cExpr string
	goVal jen.Code
}

// layoutFiles emits the layout test package: a C oracle (a cgo file whose
// static function returns gcc's sizeof, _Alignof, offsetof, constant values
// and the signedness of enum and macro types), the same table computed from
// the Go types, and the test that compares them. Both tables use the same keys, written by the same code.
func (e *emitter) layoutFiles() ([]File, error) {
	pkgName := lastElem(e.opt.LayoutPkg)
	var blocks [][]layoutRow
	var blockVars []jen.Code
	for _, r := range e.ir.Records {
		if r.Incomplete {
			continue
		}
		ct := r.CType()
		v := jen.Id("v")
		rows := []layoutRow{
			{"sizeof(" + ct + ")", "sizeof(" + ct + ")", jen.Uint64().Call(jen.Qual("unsafe", "Sizeof").Call(v.Clone()))},
			{"_Alignof(" + ct + ")", "_Alignof(" + ct + ")", jen.Uint64().Call(jen.Qual("unsafe", "Alignof").Call(v.Clone()))},
		}
		if !r.System {
			for _, it := range layoutOf(r) {
				key := fmt.Sprintf("offsetof(%s, %s)", ct, it.cPath)
				cexpr := fmt.Sprintf("__builtin_offsetof(%s, %s)", ct, it.cPath)
				base := jen.Qual("unsafe", "Pointer").Call(jen.Op("&").Id("v"))
				var g jen.Code
				switch it.kind {
				case itemStorage:
					continue
				case itemField:
					g = jen.Uint64().Call(jen.Qual("unsafe", "Offsetof").Call(jen.Id("v").Dot(it.goName)))
				case itemAccessor:
					g = jen.Qual(layoutcheckPath, "Offset").Call(base, jen.Qual("unsafe", "Pointer").Call(jen.Id("v").Dot(it.goName).Call()))
				case itemFlex:
					g = jen.Qual(layoutcheckPath, "Offset").Call(base, jen.Qual("unsafe", "Pointer").Call(
						jen.Qual("unsafe", "SliceData").Call(jen.Id("v").Dot(it.goName).Call(jen.Lit(0)))))
				}
				rows = append(rows, layoutRow{key, cexpr, g})
				rows = append(rows, memberRows(ct, it)...)
			}
		}
		blocks = append(blocks, rows)
		blockVars = append(blockVars, jen.Qual(e.pkgPath(r.Package), r.GoName))
	}
	// Constants are compared as two's complement bits, which cannot tell
	// int64 -1 from uint64 0xffffffffffffffff, nor a signed type from an
	// unsigned one while the values are small: a "signed(...)" row holds
	// whether gcc and Go make each enum type and each macro's type signed.
	var consts []layoutRow
	for _, en := range e.ir.Enums {
		consts = append(consts, enumSignRow(e, en))
		for _, x := range en.Enumerators {
			consts = append(consts, layoutRow{"enum " + x.Name, x.Name, jen.Qual(layoutcheckPath, "Int").Call(jen.Qual(e.pkgPath(en.Package), x.GoName))})
		}
	}
	for _, m := range e.ir.Macros {
		cexpr := m.Name
		if m.Pointer {
			cexpr = "(uintptr_t)(" + m.Name + ")"
		}
		goConst := jen.Qual(e.pkgPath(m.Package), m.GoName)
		consts = append(consts,
			layoutRow{"macro " + m.Name, cexpr, jen.Qual(layoutcheckPath, "Int").Call(goConst)},
			layoutRow{"signed(macro " + m.Name + ")", "(__typeof__(" + cexpr + "))-1 < 0", jen.Qual(layoutcheckPath, "Signed").Call(goConst.Clone())})
	}

	// The C oracle.
	var pre strings.Builder
	pre.WriteString(cflags(e.opt.LayoutIncludeDir))
	pre.WriteString("#include <stddef.h>\n#include <stdint.h>\n")
	for _, spec := range e.specs {
		for _, inc := range spec.Includes {
			pre.WriteString(includeLine(e.opt.LayoutIncludeDir, inc))
		}
	}
	pre.WriteString("\nstruct goverbs_row { const char *key; unsigned long long value; };\n\n")
	pre.WriteString("// A static function, not a static table: cgo cannot link a static const array.\n")
	pre.WriteString("static const struct goverbs_row *goverbs_layout_rows(int *n) {\n\tstatic const struct goverbs_row rows[] = {\n")
	count := 0
	for _, rows := range blocks {
		for _, r := range rows {
			fmt.Fprintf(&pre, "\t\t{%q, (unsigned long long)(%s)},\n", r.key, r.cExpr)
			count++
		}
	}
	for _, r := range consts {
		fmt.Fprintf(&pre, "\t\t{%q, (unsigned long long)(%s)},\n", r.key, r.cExpr)
		count++
	}
	pre.WriteString("\t};\n\t*n = sizeof(rows) / sizeof(rows[0]);\n\treturn rows;\n}\n")
	cf := jen.NewFilePathName(e.opt.LayoutPkg, pkgName)
	e.header(cf)
	cf.CgoPreamble(pre.String())
	cf.Commentf("CRows returns what gcc says of every generated layout and constant (%d rows).", count)
	cf.Func().Id("CRows").Params().Index().Qual(layoutcheckPath, "Row").Block(
		jen.Var().Id("n").Qual("C", "int"),
		jen.Id("p").Op(":=").Qual("C", "goverbs_layout_rows").Call(jen.Op("&").Id("n")),
		jen.Id("rows").Op(":=").Make(jen.Index().Qual(layoutcheckPath, "Row"), jen.Int().Call(jen.Id("n"))),
		jen.For(jen.List(jen.Id("i"), jen.Id("r")).Op(":=").Range().Qual("unsafe", "Slice").Call(jen.Id("p"), jen.Int().Call(jen.Id("n")))).Block(
			jen.Id("rows").Index(jen.Id("i")).Op("=").Qual(layoutcheckPath, "Row").Values(jen.Dict{
				jen.Id("Key"):   jen.Qual("C", "GoString").Call(jen.Id("r").Dot("key")),
				jen.Id("Value"): jen.Uint64().Call(jen.Id("r").Dot("value")),
			}),
		),
		jen.Return(jen.Id("rows")),
	)
	cFile, err := render("layout/zlayout_c.go", cf)
	if err != nil {
		return nil, err
	}

	// The Go side.
	gf := jen.NewFilePathName(e.opt.LayoutPkg, pkgName)
	e.header(gf)
	var body []jen.Code
	body = append(body, jen.Id("rows").Op(":=").Make(jen.Index().Qual(layoutcheckPath, "Row"), jen.Lit(0), jen.Lit(count)))
	for i, rows := range blocks {
		var vals []jen.Code
		for _, r := range rows {
			vals = append(vals, jen.Qual(layoutcheckPath, "Row").Values(jen.Dict{jen.Id("Key"): jen.Lit(r.key), jen.Id("Value"): r.goVal}))
		}
		body = append(body, jen.Block(
			jen.Var().Id("v").Add(blockVars[i]),
			jen.Id("rows").Op("=").Append(append([]jen.Code{jen.Id("rows")}, vals...)...),
		))
	}
	var vals []jen.Code
	for _, r := range consts {
		vals = append(vals, jen.Qual(layoutcheckPath, "Row").Values(jen.Dict{jen.Id("Key"): jen.Lit(r.key), jen.Id("Value"): r.goVal}))
	}
	if len(vals) > 0 {
		body = append(body, jen.Id("rows").Op("=").Append(append([]jen.Code{jen.Id("rows")}, vals...)...))
	}
	body = append(body, jen.Return(jen.Id("rows")))
	gf.Commentf("GoRows returns the same table as CRows, computed from the generated Go types and constants.")
	gf.Func().Id("GoRows").Params().Index().Qual(layoutcheckPath, "Row").Block(body...)
	goFile, err := render("layout/zlayout_go.go", gf)
	if err != nil {
		return nil, err
	}

	tf := jen.NewFilePathName(e.opt.LayoutPkg, pkgName)
	e.header(tf)
	if err := e.headersTest(tf); err != nil {
		return nil, err
	}
	tf.Comment("TestLayout compares every size, alignment, offset and constant value of the")
	tf.Comment("generated packages, the size and signedness of every member, and the")
	tf.Comment("signedness of every enum type and macro, with what gcc computes from the")
	tf.Comment("headers.")
	tf.Func().Id("TestLayout").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.Qual(layoutcheckPath, "Check").Call(jen.Id("t"), jen.Lit(e.ir.Version), jen.Id("CRows").Call(), jen.Id("GoRows").Call()),
	)
	testFile, err := render("layout/zlayout_test.go", tf)
	if err != nil {
		return nil, err
	}
	return []File{cFile, goFile, testFile}, nil
}

// memberRows are the rows of a member's type (memberType): its size, its
// element's size if it is an array, and its signedness if it is an integer
// or enum. gcc evaluates them on a null pointer's member inside sizeof and
// __typeof__, which evaluate nothing; Go on the field, the accessor's
// result or the flexible array's element inside unsafe.Sizeof, which
// evaluates nothing either, and through layoutcheck.Signed.
func memberRows(ct string, it item) []layoutRow {
	mt := memberTypeOf(it)
	key := func(what string) string { return fmt.Sprintf("%s(%s, %s)", what, ct, it.cPath) }
	// goMember is the member as a Go expression; goElem its innermost element.
	goMember := func() *jen.Statement {
		switch it.kind {
		case itemAccessor:
			return jen.Parens(jen.Op("*").Id("v").Dot(it.goName).Call())
		case itemFlex:
			return jen.Id("v").Dot(it.goName).Call(jen.Lit(0))
		}
		return jen.Id("v").Dot(it.goName)
	}
	goElem := func() *jen.Statement {
		g := goMember()
		for range mt.dims {
			g = g.Index(jen.Lit(0))
		}
		return g
	}
	var rows []layoutRow
	if !mt.flex {
		rows = append(rows, layoutRow{key("membersize"), "sizeof(" + mt.cMember(ct, it.cPath) + ")",
			jen.Uint64().Call(jen.Qual("unsafe", "Sizeof").Call(goMember()))})
	}
	if mt.dims > 0 {
		rows = append(rows, layoutRow{key("memberelem"), "sizeof(" + mt.cElem(ct, it.cPath) + ")",
			jen.Uint64().Call(jen.Qual("unsafe", "Sizeof").Call(goElem()))})
	}
	switch {
	case !mt.hasSign():
	case !mt.flex:
		rows = append(rows, layoutRow{key("membersigned"), "(__typeof__(" + mt.cElem(ct, it.cPath) + "))-1 < 0",
			jen.Qual(layoutcheckPath, "Signed").Call(goElem())})
	case mt.dims == 1:
		// Signed's argument is evaluated: the empty slice's element
		// cannot be, so SignedElem takes the slice.
		rows = append(rows, layoutRow{key("membersigned"), "(__typeof__(" + mt.cElem(ct, it.cPath) + "))-1 < 0",
			jen.Qual(layoutcheckPath, "SignedElem").Call(goMember())})
	}
	// A flexible array of arrays has no sign row: the static assertions
	// check it.
	return rows
}

// headersTest adds to the layout test file the digests of the headers the
// layouts were generated from and TestHeaders, which compares them with the
// headers the C side compiles against, read when the test runs: a cached
// pass of TestLayout says nothing of headers changed since (go test's cache
// keys on neither headers outside the module nor C_INCLUDE_PATH or CPATH).
func (e *emitter) headersTest(tf *jen.File) error {
	if len(e.ir.Read) == 0 {
		return fmt.Errorf("layout test: no header was read from the headers directory: nothing to tie the layouts to")
	}
	var list []jen.Code
	for _, h := range e.ir.Read {
		list = append(list, jen.Line().Values(jen.Id("Path").Op(":").Lit(h.Path), jen.Id("SHA256").Op(":").Lit(h.SHA256)))
	}
	list = append(list, jen.Line())
	tf.Comment("headers are the headers the layouts were generated from, relative to the")
	tf.Comment("include directory, with the SHA-256 of each.")
	tf.Var().Id("headers").Op("=").Index().Qual(layoutcheckPath, "Header").Values(list...)
	regen := "go generate"
	if e.opt.Command != "" {
		regen += ", or " + e.opt.Command
	}
	var dir jen.Code
	if e.opt.LayoutIncludeDir != "" {
		tf.Comment("includeDir is where the C side's headers are: the #cgo CFLAGS -I directory,")
		tf.Comment("relative to this package's directory, where go test runs the test.")
		tf.Const().Id("includeDir").Op("=").Lit(e.opt.LayoutIncludeDir)
		dir = jen.Id("includeDir")
	} else {
		tf.Comment("includeDir is the headers directory the layouts were generated from. The C")
		tf.Comment("side compiles against the machine's headers: if they are elsewhere, name")
		tf.Commentf("their directory in the environment variable %s.", "GOVERBS_LAYOUT_HEADERS")
		tf.Const().Id("includeDir").Op("=").Lit(e.opt.LayoutHeaders)
		dir = jen.Qual(layoutcheckPath, "IncludeDir").Call(jen.Id("includeDir"))
	}
	tf.Comment("TestHeaders fails if the headers the C side compiles against are not the ones")
	tf.Comment("the layouts were generated from, whatever the build cache holds: it reads")
	tf.Comment("them each time it runs.")
	tf.Func().Id("TestHeaders").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.Qual(layoutcheckPath, "CheckHeaders").Call(jen.Id("t"), dir, jen.Id("headers"), jen.Lit(regen)),
	)
	return nil
}

// enumSignRow is the "signed(...)" row of enum en. A named enum's type is
// spelled in both languages. An anonymous one has no C name: gcc makes it
// signed exactly when one of its values is negative (finish_enum), which C
// can ask of the enumerators, and its Go constants have its underlying type.
func enumSignRow(e *emitter, en *Enum) layoutRow {
	if en.CName != "" {
		return layoutRow{"signed(enum " + en.CName + ")", "(enum " + en.CName + ")-1 < 0",
			jen.Qual(layoutcheckPath, "Signed").Call(jen.Qual(e.pkgPath(en.Package), en.GoName).Call(jen.Lit(0)))}
	}
	var neg []string
	for _, x := range en.Enumerators {
		neg = append(neg, x.Name+" < 0")
	}
	return layoutRow{"signed(enum { " + en.Enumerators[0].Name + ", ... })", strings.Join(neg, " || "),
		jen.Qual(layoutcheckPath, "Signed").Call(jen.Qual(e.pkgPath(en.Package), en.Enumerators[0].GoName))}
}

func lastElem(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
