package gen

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode"

	"modernc.org/cc/v4"
	"modernc.org/token"
)

// kernelUAPI lists target headers that rdma-core's Debian packages do not
// ship: they come from the kernel's UAPI headers (linux-libc-dev) on the
// machine, whatever header set is pinned.
var kernelUAPI = map[string]bool{
	"rdma/ib_user_verbs.h": true,
}

// Model turns a loaded translation unit into the IR: every struct, union,
// enum, integer macro and function declared in the target headers (all of
// infiniband/ and rdma/ that the roots reach), each list sorted by source
// position. What cannot be expressed in Go is listed in IR.Skipped with the
// reason; constructs whose layout cc/v4 gets wrong (bit-fields, packed
// structs, members and enums, #pragma pack) are errors naming the
// declaration.
func Model(l *Loaded) (*IR, error) {
	m := &modeler{l: l, ir: &IR{}, records: map[string]*Record{}, enums: map[*cc.EnumType]*Enum{}}
	if err := m.run(); err != nil {
		return nil, err
	}
	return m.ir, nil
}

type modeler struct {
	l       *Loaded
	ir      *IR
	records map[string]*Record // by "struct tag", "union tag" or typedef name
	enums   map[*cc.EnumType]*Enum
	anon    []*Record
	headers map[string]bool
	specs   map[*cc.Declarator]*cc.DeclarationSpecifiers // see declSpecifiers
}

// pos maps a cc position to a header-relative one and reports whether it
// lies in a target header. A C library header is named relative to its
// system include directory even when the headers directory holds it too
// (-headers /usr/include): /usr/include/x86_64-linux-gnu/bits/pthreadtypes.h
// is bits/pthreadtypes.h there, as arm64's is, so that the two targets'
// records pair up and a doc comment does not depend on the machine.
func (m *modeler) pos(n interface{ Position() token.Position }) (Pos, bool) {
	p := n.Position()
	if r, ok := m.l.rel(p.Filename); ok {
		if !isTargetPath(r) {
			if s, ok := m.l.sysRel(p.Filename); ok {
				return Pos{File: s, Line: p.Line, Col: p.Column}, false
			}
		}
		return Pos{File: r, Line: p.Line, Col: p.Column}, isTargetPath(r)
	}
	if u := uapiPath(p.Filename); kernelUAPI[u] {
		return Pos{File: u, Line: p.Line, Col: p.Column}, true
	}
	if r, ok := m.l.sysRel(p.Filename); ok {
		return Pos{File: r, Line: p.Line, Col: p.Column}, false
	}
	return Pos{File: p.Filename, Line: p.Line, Col: p.Column}, false
}

func (m *modeler) run() error {
	specs := collectSpecifiers(m.l.AST.TranslationUnit)
	m.headers = map[string]bool{}
	for _, s := range specs.records {
		t := s.Type()
		p, ok := m.pos(s)
		if !ok || tagOf(t) == "" {
			continue
		}
		r, err := m.recordFor(t, nil, "")
		if err != nil {
			return err
		}
		if r.Incomplete { // a body that cc/v4 cannot complete
			return m.whyIncomplete(r.Pos, r.Describe(), t)
		}
		m.headers[p.File] = true
	}
	for _, s := range specs.enums {
		et, ok := s.Type().(*cc.EnumType)
		if !ok {
			continue
		}
		if _, err := m.enumFor(et); err != nil {
			return err
		}
	}
	if err := m.refusePacking(specs.packed); err != nil {
		return err
	}
	if err := m.functions(); err != nil {
		return err
	}
	if err := m.macros(); err != nil {
		return err
	}
	m.inlineCalls(specs.defs)

	var top []*Record
	for _, r := range m.records {
		top = append(top, r)
	}
	sortRecords(top)
	sortRecords(m.anon)
	for _, r := range append(top, m.anon...) {
		if r.Parent != nil && r.ParentMember == "" {
			continue // an anonymous member: flattened into its parent
		}
		m.ir.Records = append(m.ir.Records, r)
	}
	sortByPos(m.ir.Enums, func(e *Enum) (Pos, string) { return e.Pos, e.CName })
	sortByPos(m.ir.Funcs, funcKey)
	sortByPos(m.ir.Shadowed, funcKey)
	sortByPos(m.ir.Macros, func(x *Macro) (Pos, string) { return x.Pos, x.Name })
	sortByPos(m.ir.Aliases, func(a *Alias) (Pos, string) { return a.Pos, a.Name })
	sortByPos(m.ir.Skipped, func(s Skip) (Pos, string) { return s.Pos, s.Kind + " " + s.Name })
	for h := range m.headers {
		m.ir.Headers = append(m.ir.Headers, h)
	}
	sort.Strings(m.ir.Headers)
	m.ir.Read = m.l.Read
	return nil
}

// refusePacking fails on a packed attribute in a target header that the
// records' own check (recordFor) has not already refused, or on a pack
// pragma anywhere in the headers directory: cc/v4 ignores packed on a
// member, an enum or a typedef's anonymous struct, and pack pragmas, so it
// would lay those types out as if unpacked, where gcc packs them. The
// layout assertions and tests/layout would catch it, but -layout-only
// output has neither. A pack pragma in a header outside the directory (the
// C library's) is left alone: it is the C library's business.
func (m *modeler) refusePacking(packed []*cc.AttributeValue) error {
	for _, a := range packed {
		if p, ok := m.pos(a); ok {
			return errorAt(p, nil, "__attribute__((%s)) is not supported (cc/v4 does not apply it here: the layout would differ from C's)", a.Token.SrcStr())
		}
	}
	const why = "is not supported (cc/v4 ignores it: the layouts would differ from C's)"
	for _, pp := range m.l.packPragmas {
		if pp.Filename == pragmaOperatorSource {
			// cc/v4 rescans a _Pragma operator's text as a source of its
			// own, which says nothing of where the operator was.
			if p, ok := pragmaOperator(m.l.Headers); ok {
				return errorAt(p, nil, "_Pragma(\"pack...\") %s", why)
			}
			return fmt.Errorf("%s: a _Pragma(\"pack...\") operator, from a macro, %s", m.l.Roots[0], why)
		}
		if r, ok := m.l.rel(pp.Filename); ok {
			return errorAt(Pos{File: r, Line: pp.Line, Col: pp.Column}, nil, "#pragma pack %s", why)
		}
	}
	return nil
}

// funcKey orders functions by position, then name.
func funcKey(f *Func) (Pos, string) { return f.Pos, f.Name }

func sortRecords(rs []*Record) {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].System != rs[j].System {
			return !rs[i].System // C library types last
		}
		if rs[i].Pos != rs[j].Pos {
			return rs[i].Pos.less(rs[j].Pos)
		}
		return rs[i].CType() < rs[j].CType()
	})
}

// tagOf is the tag of a struct, union or enum type, "" if anonymous.
func tagOf(t cc.Type) string {
	var tok cc.Token
	switch x := t.(type) {
	case *cc.StructType:
		tok = x.Tag()
	case *cc.UnionType:
		tok = x.Tag()
	case *cc.EnumType:
		tok = x.Tag()
	default:
		return ""
	}
	return tok.SrcStr()
}

// specifiers are the struct, union and enum specifiers with a body, the
// packed attributes and the function definitions, in source order.
type specifiers struct {
	records []*cc.StructOrUnionSpecifier
	enums   []*cc.EnumSpecifier
	packed  []*cc.AttributeValue
	defs    []*cc.FunctionDefinition
}

// collectSpecifiers walks the syntax tree (exported child pointers only;
// function bodies are skipped) and gathers every struct, union and enum
// specifier that has a body, every packed attribute and every function
// definition (its body unwalked). The AST's own maps cannot be used: their
// order changes between runs, and anonymous enums are not in them.
func collectSpecifiers(tu *cc.TranslationUnit) specifiers {
	var s specifiers
	var roots []any
	for ; tu != nil; tu = tu.TranslationUnit {
		roots = append(roots, tu.ExternalDeclaration)
	}
	walkAST(false, func(n any) bool {
		switch n := n.(type) {
		case *cc.StructOrUnionSpecifier:
			if n.StructDeclarationList != nil {
				s.records = append(s.records, n)
			}
		case *cc.EnumSpecifier:
			if n.EnumeratorList != nil {
				s.enums = append(s.enums, n)
			}
		case *cc.AttributeValue:
			if name := n.Token.SrcStr(); name == "packed" || name == "__packed__" {
				s.packed = append(s.packed, n)
			}
		case *cc.FunctionDefinition:
			s.defs = append(s.defs, n)
		case *cc.CompoundStatement:
			return false
		}
		return true
	}, roots...)
	return s
}

// walkAST calls visit on each root and on every node below it, once each,
// in source order, except below a node for which visit returns false. A
// node's children are the exported fields of cc/v4's node structs that
// hold a node by pointer and, with expressions, those that hold an
// expression (an ExpressionNode interface).
func walkAST(expressions bool, visit func(n any) (descend bool), roots ...any) {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if v.Kind() == reflect.Interface {
			v = v.Elem()
		}
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if !visit(v.Interface()) {
			return
		}
		e := v.Elem()
		t := e.Type()
		for i := 0; i < e.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && (f.Type.Kind() == reflect.Pointer || expressions && f.Type.Kind() == reflect.Interface) {
				walk(e.Field(i))
			}
		}
	}
	for _, r := range roots {
		walk(reflect.ValueOf(r))
	}
}

// recordFor returns the IR record of a struct or union type, creating it on
// first use. Anonymous records are keyed by their parent and member.
func (m *modeler) recordFor(t cc.Type, parent *Record, member string) (*Record, error) {
	union := t.Kind() == cc.Union
	r := &Record{Union: union}
	var key string
	switch tag := tagOf(t); {
	case tag != "":
		r.CName = tag
		key = r.Keyword() + " " + tag
	case t.Typedef() != nil:
		r.CName, r.Typedef = t.Typedef().Name(), true
		key = r.CName
	default:
		// C promotes the members of an anonymous member into the enclosing
		// record, so a record nested there is named from that record.
		for parent != nil && parent.Parent != nil && parent.ParentMember == "" {
			parent = parent.Parent
		}
		r.Parent, r.ParentMember = parent, member
	}
	if key != "" {
		if old := m.records[key]; old != nil {
			if !old.Incomplete || t.IsIncomplete() {
				return old, nil
			}
			r = old // a definition seen after a forward declaration
		} else {
			m.records[key] = r
		}
	} else {
		m.anon = append(m.anon, r)
	}

	var posNode interface{ Position() token.Position }
	switch x := t.(type) {
	case *cc.StructType:
		tok := x.Tag()
		posNode = &tok
	case *cc.UnionType:
		tok := x.Tag()
		posNode = &tok
	}
	if r.Typedef {
		posNode = t.Typedef()
	}
	target := true
	if posNode != nil && key != "" {
		r.Pos, target = m.pos(posNode)
	} else if parent != nil {
		r.Pos = parent.Pos
		target = !parent.System
	}
	if t.IsIncomplete() {
		r.Incomplete = true
		return r, nil
	}
	r.Incomplete = false
	r.Size, r.Align = t.Size(), int64(t.Align())
	if !target {
		r.System = true // opaque storage: only size and alignment matter
		if err := checkAlign(r); err != nil {
			return nil, err
		}
		return r, nil
	}
	if attr := t.Attributes(); attr != nil && (attr.IsAttrSet("__packed__") || attr.IsAttrSet("packed")) {
		return nil, errorAt(r.Pos, nil, "%s: __attribute__((packed)) is not supported (cc/v4 lays it out wrong)", r.Describe())
	}
	n := numFields(t)
	r.Members = r.Members[:0]
	for i := 0; i < n; i++ {
		f := fieldByIndex(t, i)
		if f.IsBitfield() {
			return nil, errorAt(m.memberPos(f, r.Pos), nil, "%s member %s: bit-fields are not supported", r.Describe(), f.Name())
		}
		mt := f.Type()
		if f.Name() == "" && mt.Kind() != cc.Struct && mt.Kind() != cc.Union {
			// "int;" declares nothing: gcc ignores it, cc/v4 gives it storage.
			return nil, errorAt(m.memberPos(f, r.Pos), nil, "%s: a member of type %s declares no name (not supported: gcc ignores it, cc/v4 lays it out)", r.Describe(), mt)
		}
		if a := int64(mt.Align()); a > maxGoAlign {
			return nil, errorAt(m.memberPos(f, r.Pos), nil, "%s member %s: its type %s is aligned to %d bytes: Go aligns to at most %d",
				r.Describe(), f.Name(), mt, a, maxGoAlign)
		}
		mem := &Member{Name: f.Name(), Offset: f.Offset(), Flexible: f.IsFlexibleArrayMember(), Pos: m.memberPos(f, r.Pos)}
		ty, err := m.typeOf(mt, r, mem.Name)
		if err != nil {
			return nil, errorAt(m.memberPos(f, r.Pos), err, "%s member %s", r.Describe(), mem.Name)
		}
		if ga := goAlign(ty); ty.Align < ga {
			return nil, errorAt(m.memberPos(f, r.Pos), nil, "%s member %s: its type %s is aligned to %d bytes (an aligned attribute on a typedef lowers it), where Go aligns it to %d: no Go layout matches",
				r.Describe(), f.Name(), mt, ty.Align, ga)
		}
		mem.Type = ty
		r.Members = append(r.Members, mem)
	}
	if err := checkAlign(r); err != nil { // after the members, so that one to blame is named
		return nil, err
	}
	return r, nil
}

// whyIncomplete explains why record type t, defined at p and described as
// desc, is still incomplete for cc/v4 although it has a body: it names the
// member at fault, in an anonymous record if need be, and the rule of C it
// breaks (gcc rejects each of these definitions).
func (m *modeler) whyIncomplete(p Pos, desc string, t cc.Type) error {
	n := numFields(t)
	for i := 0; i < n; i++ {
		f := fieldByIndex(t, i)
		ft := f.Type()
		if !ft.IsIncomplete() {
			continue
		}
		mp := m.memberPos(f, p)
		switch {
		case ft.Kind() == cc.Array && t.Kind() == cc.Union:
			return errorAt(mp, nil, "%s member %s: a union cannot hold a flexible array member (wrap it in a struct, as __DECLARE_FLEX_ARRAY does)", desc, f.Name())
		case ft.Kind() == cc.Array && i < n-1:
			return errorAt(mp, nil, "%s member %s: a flexible array member must be the last member of a struct", desc, f.Name())
		case (ft.Kind() == cc.Struct || ft.Kind() == cc.Union) && tagOf(ft) == "" && ft.Typedef() == nil:
			return m.whyIncomplete(mp, fmt.Sprintf("%s member %s (%s { ... })", desc, f.Name(), ft.Kind()), ft)
		case ft.Kind() != cc.Array:
			return errorAt(mp, nil, "%s member %s: its type %s is incomplete (declared, never defined)", desc, f.Name(), typeName(ft))
		}
	}
	return errorAt(p, nil, "%s: its definition is incomplete (cc/v4 cannot lay it out)", desc)
}

// typeName spells a record or enum type by its typedef or tag, as C
// declarations do ("struct ibv_y"), and any other type as cc/v4 does.
func typeName(t cc.Type) string {
	switch {
	case t.Typedef() != nil:
		return t.Typedef().Name()
	case tagOf(t) != "":
		return fmt.Sprintf("%s %s", t.Kind(), tagOf(t))
	}
	return t.String()
}

// checkAlign fails if r is aligned beyond what Go can lay out.
func checkAlign(r *Record) error {
	if r.Align > maxGoAlign {
		return errorAt(r.Pos, nil, "%s: aligned to %d bytes (by an aligned attribute or _Alignas on it or on a member): Go aligns to at most %d",
			r.Describe(), r.Align, maxGoAlign)
	}
	return nil
}

// placedError is an error whose message begins with the file:line of the
// declaration at fault: it is passed on as it is, so that a message names
// one place, the innermost.
type placedError struct{ msg string }

func (e *placedError) Error() string { return e.msg }

// errorAt is the error "p: what[: err]", what made from format and args, or
// err itself if it already names its place.
func errorAt(p Pos, err error, format string, args ...any) error {
	var placed *placedError
	if errors.As(err, &placed) {
		return err
	}
	msg := p.String() + ": " + fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &placedError{msg}
}

// maxGoAlign is the largest alignment a Go type has (uint64, on every
// architecture the generator targets): Go cannot lay out a C type aligned
// beyond it.
const maxGoAlign = 8

// goAlign is the alignment of the Go type that mirrors t: a record's is its
// C alignment (the emitter raises a struct's to it), anything else's is
// its size's, or its element's, up to maxGoAlign.
func goAlign(t *Type) int64 {
	switch t.Kind {
	case KArray:
		return goAlign(t.Elem)
	case KRecord:
		return t.Record.Align // the record's own: a typedef may lower t.Align
	}
	return min(t.Size, maxGoAlign)
}

// memberPos is where member f is declared: its declarator's line, or
// outer (its record's) for a member without one (an anonymous struct or
// union).
func (m *modeler) memberPos(f *cc.Field, outer Pos) Pos {
	if d := f.Declarator(); d != nil {
		p, _ := m.pos(d)
		return p
	}
	return outer
}

func numFields(t cc.Type) int {
	switch x := t.(type) {
	case *cc.StructType:
		return x.NumFields()
	case *cc.UnionType:
		return x.NumFields()
	}
	return 0
}

func fieldByIndex(t cc.Type, i int) *cc.Field {
	switch x := t.(type) {
	case *cc.StructType:
		return x.FieldByIndex(i)
	case *cc.UnionType:
		return x.FieldByIndex(i)
	}
	return nil
}

var cgoBase = map[cc.Kind]string{
	cc.Bool: "_Bool", cc.Char: "char", cc.SChar: "schar", cc.UChar: "uchar",
	cc.Short: "short", cc.UShort: "ushort", cc.Int: "int", cc.UInt: "uint",
	cc.Long: "long", cc.ULong: "ulong", cc.LongLong: "longlong", cc.ULongLong: "ulonglong",
	cc.Float: "float", cc.Double: "double",
}

// typeOf converts a C type. parent and path name the member an anonymous
// record sits in (path reaches it from parent: the member's name, then [0]
// for each array level), so it can be named and measured later.
func (m *modeler) typeOf(t cc.Type, parent *Record, path string) (*Type, error) {
	ty := &Type{Size: t.Size(), Align: int64(t.Align())}
	if d := t.Typedef(); d != nil {
		ty.Typedef = d.Name()
	}
	switch k := t.Kind(); k {
	case cc.Void:
		ty.Kind = KVoid
	case cc.Bool, cc.Char, cc.SChar, cc.UChar, cc.Short, cc.UShort, cc.Int, cc.UInt,
		cc.Long, cc.ULong, cc.LongLong, cc.ULongLong:
		ty.Kind, ty.CBase = KInt, cgoBase[k]
		ty.Signed = cc.IsSignedInteger(t)
		ty.Bool, ty.Char = k == cc.Bool, k == cc.Char
		if ty.Char {
			// Plain char is signed on amd64 and unsigned on arm64: Go
			// keeps it int8 everywhere (same storage), so that names and
			// strings have one Go type on every architecture.
			ty.Signed = true
		}
	case cc.Float, cc.Double:
		ty.Kind, ty.CBase = KFloat, cgoBase[k]
	case cc.Ptr:
		elem := t.(*cc.PointerType).Elem()
		if elem.Kind() == cc.Function {
			ty.Kind = KFuncPtr
			return ty, nil
		}
		ty.Kind = KPointer
		e, err := m.typeOf(elem, nil, "")
		if err != nil {
			return nil, err
		}
		ty.Elem = e
	case cc.Array:
		at := t.(*cc.ArrayType)
		ty.Kind, ty.Len = KArray, at.Len()
		if ty.Len < 0 {
			ty.Len = 0
		}
		e, err := m.typeOf(at.Elem(), parent, path+"[0]") // an element, one level down
		if err != nil {
			return nil, err
		}
		ty.Elem = e
	case cc.Struct, cc.Union:
		if tagOf(t) == "" && t.Typedef() == nil && parent == nil {
			return nil, fmt.Errorf("anonymous %s outside a member", t.Kind())
		}
		r, err := m.recordFor(t, parent, path)
		if err != nil {
			return nil, err
		}
		ty.Kind, ty.Record = KRecord, r
	case cc.Enum:
		et, ok := t.(*cc.EnumType)
		if !ok {
			return nil, fmt.Errorf("enum type %s has no enumerators", t)
		}
		e, err := m.enumFor(et)
		if err != nil {
			return nil, err
		}
		ty.Signed = enumSigned(et)
		if e == nil { // an enum from outside the target headers: its integer
			ty.Kind, ty.CBase = KInt, cgoBase[et.UnderlyingType().Kind()]
			if ty.Signed != cc.IsSignedInteger(et) {
				ty.CBase = cgoBase[flipSign[et.UnderlyingType().Kind()]]
			}
			break
		}
		ty.Kind, ty.Enum = KEnum, e
	case cc.Function:
		ty.Kind = KFuncPtr // a function parameter of function type decays to a pointer
	default:
		return nil, fmt.Errorf("the C type %s (%s) has no Go equivalent", t, k)
	}
	return ty, nil
}

// enumFor returns the IR of an enum declared in a target header, nil for one
// declared elsewhere.
func (m *modeler) enumFor(et *cc.EnumType) (*Enum, error) {
	if e, ok := m.enums[et]; ok {
		return e, nil
	}
	for old, e := range m.enums { // the same enum reached through another type value
		if tag := tagOf(et); tag != "" && tagOf(old) == tag {
			m.enums[et] = e
			return e, nil
		}
	}
	list := et.Enumerators()
	var posNode interface{ Position() token.Position }
	if tag := et.Tag(); tagOf(et) != "" {
		posNode = &tag
	} else if len(list) > 0 {
		posNode = list[0]
	}
	if posNode == nil {
		m.enums[et] = nil
		return nil, nil
	}
	p, target := m.pos(posNode)
	if !target {
		m.enums[et] = nil
		return nil, nil
	}
	e := &Enum{CName: tagOf(et), Pos: p, Size: et.Size(), Signed: enumSigned(et)}
	for _, en := range list {
		v, ok := intValue(en.Value())
		if !ok {
			return nil, errorAt(p, nil, "enumerator %s has no integer value", en.Token.SrcStr())
		}
		ep, _ := m.pos(en)
		e.Enumerators = append(e.Enumerators, &Enumerator{Name: en.Token.SrcStr(), Pos: ep, Value: v})
	}
	m.enums[et] = e
	m.ir.Enums = append(m.ir.Enums, e)
	return e, nil
}

// enumSigned reports whether gcc makes enum type et signed: when one of
// its values is negative (gcc's finish_enum). cc/v4's own answer
// (cc.IsSignedInteger) is wrong for an enum with a value of 2^63 or more,
// such as 1ULL << 63: it compares the values as int64, finds one below
// zero and makes the enum long, where gcc makes it unsigned long; the
// constants then came out negative in Go (-1 for 0xffffffffffffffffULL),
// and the layout test, which compares bits, could not tell.
//
// cc/v4 gives an enumerator written with an unsigned value a UInt64Value,
// never negative; one without "= value" continues from the one before, so
// it is unsigned when that one is (cc/v4 gives it an Int64Value: after
// 0xfffffffffffffffeULL, -1), and otherwise negative when its value is.
func enumSigned(et *cc.EnumType) bool {
	unsigned := false // the previous enumerator's value is of an unsigned type
	for _, en := range et.Enumerators() {
		switch v := en.Value().(type) {
		case cc.UInt64Value:
			unsigned = true
		case cc.Int64Value:
			if en.Case == cc.EnumeratorExpr {
				unsigned = false
			}
			if !unsigned && v < 0 {
				return true
			}
		}
	}
	return false
}

// flipSign maps an integer kind to the kind of the other signedness.
var flipSign = map[cc.Kind]cc.Kind{
	cc.Int: cc.UInt, cc.UInt: cc.Int, cc.Long: cc.ULong, cc.ULong: cc.Long,
	cc.LongLong: cc.ULongLong, cc.ULongLong: cc.LongLong,
}

func intValue(v cc.Value) (uint64, bool) {
	switch x := v.(type) {
	case cc.Int64Value:
		return uint64(x), true
	case cc.UInt64Value:
		return uint64(x), true
	}
	return 0, false
}

// inlineCalls sets the Calls of each static inline, and of each macro
// whose expansion calls one, from the bodies of the function definitions
// in the target headers (defs).
func (m *modeler) inlineCalls(defs []*cc.FunctionDefinition) {
	direct := map[string][]string{}
	for _, d := range defs {
		if _, target := m.pos(d.Declarator); target && d.CompoundStatement != nil {
			direct[d.Declarator.Name()] = calledNames(d.CompoundStatement)
		}
	}
	for _, f := range m.ir.Funcs {
		from := f.Name
		switch {
		case f.Kind == FuncMacro && direct[f.Target] != nil:
			from = f.Target // an inline the macro calls: what it calls
		case f.Kind != FuncInline:
			continue
		}
		seen := map[string]bool{from: true}
		var visit func(name string)
		visit = func(name string) {
			for _, c := range direct[name] {
				if !seen[c] {
					seen[c] = true
					f.Calls = append(f.Calls, c)
					visit(c)
				}
			}
		}
		visit(from)
		sort.Strings(f.Calls)
	}
}

// calledNames lists, sorted and once each, the identifiers that body calls
// (f(...), not calls through pointers or members). Macros are already
// expanded: a call through one names what it expands to.
func calledNames(body *cc.CompoundStatement) []string {
	set := map[string]bool{}
	walkAST(true, func(n any) bool {
		if pe, ok := n.(*cc.PostfixExpression); ok && pe.Case == cc.PostfixExpressionCall {
			if id, ok := pe.PostfixExpression.(*cc.PrimaryExpression); ok && id.Case == cc.PrimaryExpressionIdent {
				set[id.Token.SrcStr()] = true
			}
		}
		return true
	}, body)
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// functions gathers prototypes and static inline definitions.
func (m *modeler) functions() error {
	for name, nodes := range m.l.AST.Scope.Nodes {
		var decl *cc.Declarator
		for _, n := range nodes {
			d, ok := n.(*cc.Declarator)
			if !ok || d.Type().Kind() != cc.Function || d.IsTypename() {
				continue
			}
			if decl == nil || d.IsFuncDef() {
				decl = d
			}
		}
		if decl == nil {
			continue
		}
		p, target := m.pos(decl)
		if !target {
			continue
		}
		f, reason, err := m.function(name, p, decl)
		if err != nil {
			return err
		}
		if mac := m.l.AST.Macros[name]; mac != nil && mac.IsFnLike {
			// The macro of the same name is what C callers get (see
			// macros); the prototype behind it still needs its trampoline.
			if reason == "" && !decl.IsStatic() {
				m.ir.Shadowed = append(m.ir.Shadowed, f)
			}
			continue
		}
		if reason != "" {
			m.ir.Skipped = append(m.ir.Skipped, Skip{Kind: "function", Name: name, Pos: p, Reason: reason})
			continue
		}
		if decl.IsStatic() {
			f.Kind = FuncInline
		}
		m.ir.Funcs = append(m.ir.Funcs, f)
	}
	return nil
}

// function builds a Func from a function's declarator; a non-empty reason
// means it cannot be expressed as a stub.
func (m *modeler) function(name string, p Pos, d *cc.Declarator) (*Func, string, error) {
	ft := d.Type().(*cc.FunctionType)
	if ft.IsVariadic() {
		return nil, "variadic: cgo cannot call a variadic C function", nil
	}
	f := &Func{Name: name, Pos: p}
	params := ft.Parameters()
	if len(params) == 1 && params[0].Type().Kind() == cc.Void {
		params = nil
	}
	for i, prm := range params {
		t, err := m.typeOf(prm.Type().Decay(), nil, "")
		if err != nil {
			return nil, "", errorAt(p, err, "%s parameter %d", name, i)
		}
		if t.Kind == KRecord && t.Record.Parent != nil {
			return nil, "takes an anonymous struct by value", nil
		}
		if t.Kind == KVoid {
			// Not C ("void addr"), but cc/v4 accepts it (found by FuzzLoad).
			return nil, fmt.Sprintf("parameter %d has type void", i+1), nil
		}
		f.Params = append(f.Params, &Param{Name: prm.Name(), Type: t})
	}
	res, err := m.typeOf(ft.Result(), nil, "")
	if err != nil {
		return nil, "", errorAt(p, err, "%s result", name)
	}
	f.Result = res
	var spelled []Spelling
	f.ResultSpelling, spelled = m.spellFunc(d, len(f.Params))
	for i, s := range spelled {
		f.Params[i].Spelling = s
	}
	return f, "", nil
}

// macros gathers integer object-like macros and function-like macros that
// expand to a call of a declared function.
func (m *modeler) macros() error {
	enumerators := map[string]enumerator{}
	for _, e := range m.ir.Enums {
		for _, x := range e.Enumerators {
			enumerators[x.Name] = enumerator{e, x}
		}
	}
	for name, mac := range m.l.AST.Macros {
		p, target := m.pos(mac)
		if !target {
			continue
		}
		if !mac.IsFnLike {
			if len(mac.ReplacementList()) == 0 || builtinMacros[name] {
				continue // include guards, feature flags, __FILE__: not declarations
			}
			v, ok := intValue(mac.Value())
			if t := mac.Type(); ok && t != nil && t.Kind() == cc.Ptr {
				// ((void *)-1) and friends: a sentinel address, kept as uintptr.
				m.ir.Macros = append(m.ir.Macros, &Macro{Name: name, Pos: p, Value: v, Size: t.Size(),
					Pointer: true, CType: t.String()})
				continue
			}
			if alias := m.aliasOf(mac); alias != nil {
				alias.Name, alias.Pos = name, p
				m.ir.Aliases = append(m.ir.Aliases, alias)
				continue
			}
			if !ok || !cc.IsIntegerType(mac.Type()) {
				m.ir.Skipped = append(m.ir.Skipped, Skip{Kind: "macro", Name: name, Pos: p,
					Reason: "not an integer constant: " + describeMacroValue(mac)})
				continue
			}
			t := mac.Type()
			signed, ctype := cc.IsSignedInteger(t), t.String()
			if u, isU := mac.Value().(cc.UInt64Value); isU && signed && t.Size() > 0 && t.Size() <= 8 && uint64(u) > 1<<(8*t.Size()-1)-1 {
				// A value no signed type of this size holds: an enumerator
				// of an enum that cc/v4 makes signed and gcc unsigned (see
				// enumSigned), whose type gcc gives it.
				signed, ctype = false, "unsigned "+ctype
			}
			size := t.Size()
			if en, x := enumeratorOf(mac, enumerators); x != nil {
				signed, size, ctype = enumeratorType(en, x)
			}
			m.ir.Macros = append(m.ir.Macros, &Macro{Name: name, Pos: p, Value: v, Size: size,
				Signed: signed, CType: ctype})
			continue
		}
		f, reason, err := m.macroFunc(name, p, mac)
		if err != nil {
			return err
		}
		if reason != "" {
			m.ir.Skipped = append(m.ir.Skipped, Skip{Kind: "function-like macro", Name: name, Pos: p, Reason: reason})
			continue
		}
		m.ir.Funcs = append(m.ir.Funcs, f)
	}
	return nil
}

type enumerator struct {
	enum *Enum
	x    *Enumerator
}

// enumeratorOf returns the enumerator a macro's replacement names, alone
// and perhaps in parentheses ("#define IBV_QPF_GRH_REQUIRED
// IB_UVERBS_QPF_GRH_REQUIRED"), or nil.
func enumeratorOf(mac *cc.Macro, enumerators map[string]enumerator) (*Enum, *Enumerator) {
	toks := mac.ReplacementList()
	for len(toks) >= 3 && toks[0].SrcStr() == "(" && toks[len(toks)-1].SrcStr() == ")" {
		toks = toks[1 : len(toks)-1]
	}
	if len(toks) != 1 {
		return nil, nil
	}
	e := enumerators[toks[0].SrcStr()]
	return e.enum, e.x
}

// enumeratorType is the type gcc gives enumerator x of en: int when its
// value fits one, and otherwise en's type (gcc's finish_enum; C makes every
// enumerator an int). cc/v4 gives it en's type, unsigned int for an enum
// without negative values, so a macro naming IB_UVERBS_QPF_GRH_REQUIRED
// came out uint32 where gcc's is int.
func enumeratorType(en *Enum, x *Enumerator) (signed bool, size int64, ctype string) {
	fits := x.Value <= math.MaxInt32
	if en.Signed {
		v := signExtend(x.Value, en.Size)
		fits = v >= math.MinInt32 && v <= math.MaxInt32
	}
	if fits {
		return true, 4, "int"
	}
	ctype = "enum " + en.CName
	if en.CName == "" {
		ctype = "anonymous enum"
	}
	return en.Signed, en.Size, ctype
}

// builtinMacros are predefined by the preprocessor; cc/v4 may report them at
// the position of their first use.
var builtinMacros = map[string]bool{"__FILE__": true, "__LINE__": true, "__func__": true, "__COUNTER__": true}

// aliasOf recognises "#define ibv_x ib_uverbs_x", where the replacement is
// the tag of a struct, union or enum declared in a target header: C code
// writes "enum ibv_x", Go gets a type alias.
func (m *modeler) aliasOf(mac *cc.Macro) *Alias {
	toks := mac.ReplacementList()
	if len(toks) != 1 {
		return nil
	}
	tag := toks[0].SrcStr()
	for _, kw := range []string{"struct ", "union "} {
		if r := m.records[kw+tag]; r != nil && !r.System {
			return &Alias{Record: r}
		}
	}
	for _, e := range m.ir.Enums {
		if e.CName == tag {
			return &Alias{Enum: e}
		}
	}
	return nil
}

func describeMacroValue(mac *cc.Macro) string {
	if t := mac.Type(); t != nil && t.Kind() != cc.InvalidKind {
		return "its type is " + t.String()
	}
	return "it has no constant value (" + tokensString(mac.ReplacementList()) + ")"
}

func tokensString(toks []cc.Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.SrcStr())
	}
	s := b.String()
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// macroFunc recognises "#define NAME(a, b) TARGET(args...)" where TARGET is a
// declared function and each macro parameter is passed, possibly in
// parentheses, as one whole argument: the stub takes the macro's parameters
// with the target's parameter types and calls the macro itself, so C's
// compile-time choices (such as ibv_reg_mr's __builtin_constant_p) still run.
func (m *modeler) macroFunc(name string, p Pos, mac *cc.Macro) (*Func, string, error) {
	toks := mac.ReplacementList()
	if why := typeGeneric(mac); why != "" {
		return nil, why, nil
	}
	if !isSingleCall(toks) {
		return nil, "does not expand to a single function call: " + tokensString(toks), nil
	}
	if mac.VarArg >= 0 {
		return nil, "variadic macro", nil
	}
	target := toks[0].SrcStr()
	var td *cc.Declarator
	for _, n := range m.l.AST.Scope.Nodes[target] {
		if d, ok := n.(*cc.Declarator); ok && d.Type().Kind() == cc.Function {
			td = d
		}
	}
	if td == nil {
		return nil, "expands to " + target + ", which is not a declared function: " + tokensString(toks), nil
	}
	args, ok := splitArgs(toks[2 : len(toks)-1])
	if !ok {
		return nil, "unbalanced parentheses in its expansion", nil
	}
	if nparams := len(td.Type().(*cc.FunctionType).Parameters()); len(args) != nparams {
		return nil, fmt.Sprintf("calls %s with %d arguments, which takes %d", target, len(args), nparams), nil
	}
	full, reason, err := m.function(target, p, td)
	if err != nil || reason != "" {
		return nil, reason, err
	}
	f := &Func{Name: name, Pos: p, Kind: FuncMacro, Target: target, Result: full.Result, ResultSpelling: full.ResultSpelling}
	for _, prm := range mac.Params {
		pn := prm.SrcStr()
		idx := -1
		for i, a := range args {
			if a == pn {
				idx = i
				break
			}
		}
		if idx < 0 {
			return nil, fmt.Sprintf("parameter %s is not passed as a whole argument of %s", pn, target), nil
		}
		f.Params = append(f.Params, &Param{Name: pn, Type: full.Params[idx].Type, Spelling: full.Params[idx].Spelling})
	}
	return f, "", nil
}

// isSingleCall reports whether toks read NAME ( ... ) with the parenthesis
// after NAME closed by the last token: not "(x) * 2", not "f(x) + g(x)".
func isSingleCall(toks []cc.Token) bool {
	if len(toks) < 3 || toks[1].SrcStr() != "(" || toks[len(toks)-1].SrcStr() != ")" {
		return false
	}
	for i, c := range toks[0].SrcStr() {
		if !(c == '_' || unicode.IsLetter(c) || i > 0 && unicode.IsDigit(c)) {
			return false
		}
	}
	depth := 0
	for i, t := range toks[1:] {
		switch t.SrcStr() {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 && i != len(toks)-2 {
				return false
			}
		}
	}
	return depth == 0
}

// typeGeneric explains why a function-like macro has no Go signature when one
// of its parameters stands for a type or a member name rather than a value.
func typeGeneric(mac *cc.Macro) string {
	params := map[string]bool{}
	for _, p := range mac.Params {
		params[p.SrcStr()] = true
	}
	toks := mac.ReplacementList()
	for i, t := range toks {
		s := t.SrcStr()
		switch {
		case i == 0 && (s == "struct" || s == "union"):
			return "declares struct members from its arguments: a C declaration template, not a function"
		case s == "##":
			return "pastes tokens (##) into new identifiers: a C declaration template, not a function"
		case (s == "->" || s == ".") && i+1 < len(toks) && params[toks[i+1].SrcStr()]:
			return fmt.Sprintf("takes a member name (%s): generic over struct members, so no Go function signature can express it", toks[i+1].SrcStr())
		case s == "offsetof" && i+2 < len(toks) && params[toks[i+2].SrcStr()]:
			return fmt.Sprintf("takes a type (%s) for offsetof: generic over types, so no Go function signature can express it", toks[i+2].SrcStr())
		}
	}
	return ""
}

// splitArgs splits macro argument tokens at top-level commas; each argument
// is returned with redundant outer parentheses removed, as source text.
func splitArgs(toks []cc.Token) ([]string, bool) {
	var args []string
	var cur []string
	depth := 0
	flush := func() {
		s := strings.Join(cur, " ")
		for strings.HasPrefix(s, "( ") && strings.HasSuffix(s, " )") && balanced(s[2:len(s)-2]) {
			s = s[2 : len(s)-2]
		}
		args = append(args, s)
		cur = nil
	}
	for _, t := range toks {
		s := t.SrcStr()
		switch s {
		case "(":
			depth++
		case ")":
			depth--
			if depth < 0 {
				return nil, false
			}
		case ",":
			if depth == 0 {
				flush()
				continue
			}
		}
		cur = append(cur, s)
	}
	if depth != 0 {
		return nil, false
	}
	if len(cur) > 0 || len(args) > 0 {
		flush()
	}
	return args, true
}

func balanced(s string) bool {
	d := 0
	for _, f := range strings.Fields(s) {
		switch f {
		case "(":
			d++
		case ")":
			d--
			if d < 0 {
				return false
			}
		}
	}
	return d == 0
}
