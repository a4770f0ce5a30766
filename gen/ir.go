package gen

import (
	"fmt"
	"sort"
)

// Pos is a position in a header, with File relative to the include directory
// (for example "infiniband/verbs.h"). Col only orders declarations that
// share a line; messages and comments name file:line.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// less orders positions by file, line, then column.
func (p Pos) less(q Pos) bool {
	if p.File != q.File {
		return p.File < q.File
	}
	if p.Line != q.Line {
		return p.Line < q.Line
	}
	return p.Col < q.Col
}

// sortByPos sorts xs by source position, then name: a total order, so the
// result never depends on the order xs were gathered in (cc/v4 hands
// functions and macros over in map order, and several declarations can
// share a position: "int a(void), b(void);").
func sortByPos[T any](xs []T, key func(T) (Pos, string)) {
	sort.Slice(xs, func(i, j int) bool {
		pi, ni := key(xs[i])
		pj, nj := key(xs[j])
		if pi != pj {
			return pi.less(pj)
		}
		return ni < nj
	})
}

// TypeKind classifies a C type as far as the Go side needs to know.
type TypeKind int

const (
	KVoid    TypeKind = iota
	KInt              // any integer, _Bool and char included
	KFloat            // float, double
	KPointer          // pointer to Elem (Elem is KVoid for void *)
	KFuncPtr          // pointer to function; opaque to Go
	KArray            // Len elements of Elem
	KRecord           // struct or union, see Record
	KEnum             // enum, see Enum
)

// Type is the IR of a C type: enough to lay it out in Go and to spell it in cgo.
type Type struct {
	Kind   TypeKind
	Size   int64
	Align  int64
	Signed bool   // KInt, KEnum
	Bool   bool   // KInt: C _Bool
	Char   bool   // KInt: plain char (for char * parameters)
	CBase  string // KInt, KFloat: the C base type, in cgo spelling ("uint", "ulong", "char", "double")
	// Typedef is the C typedef name the declaration used ("__be32",
	// "uint32_t", "size_t"), empty if none.
	Typedef string
	Elem    *Type
	Len     int64
	Record  *Record
	Enum    *Enum
	// GoEnum, set by a Retypes patch on an integer parameter, result or
	// member (see PackageSpec.Retypes), is the named enum whose Go type
	// the Go side spells it with. Everything C sees stays the C type's:
	// the cgo conversion (C.uint(access)), the size, the trampolines'
	// ABI class. Where Go is compared with C, the size is the C type's
	// and the sign the enum's: the layout test compares the enum's sign
	// with gcc's, verify the size (see shapesAgree).
	GoEnum *Enum
}

// Record is a C struct or union.
type Record struct {
	// CName is the tag ("ibv_wc"), or for a type known only by its typedef
	// ("pthread_mutex_t") the typedef name; empty for an anonymous record,
	// which is named after the member that holds it (Parent, ParentMember).
	CName        string
	Typedef      bool // CName is a typedef name, not a tag
	Union        bool
	Pos          Pos
	Size         int64
	Align        int64
	Members      []*Member
	Incomplete   bool // declared but never defined: opaque, used only behind pointers
	System       bool // defined outside the target headers (glibc): opaque aligned storage
	Parent       *Record
	ParentMember string

	GoName  string
	Package string // the package that declares it
}

// Keyword is "struct" or "union".
func (r *Record) Keyword() string {
	if r.Union {
		return "union"
	}
	return "struct"
}

// CType is a C type expression naming r, usable in sizeof and offsetof.
func (r *Record) CType() string {
	switch {
	case r.Parent != nil:
		return fmt.Sprintf("__typeof__(((%s *)0)->%s)", r.Parent.CType(), r.ParentMember)
	case r.Typedef:
		return r.CName
	default:
		return r.Keyword() + " " + r.CName
	}
}

// Describe names r for messages and doc comments.
func (r *Record) Describe() string {
	if r.Parent != nil {
		return fmt.Sprintf("%s member %s (%s %s)", r.Parent.Describe(), r.ParentMember, r.Keyword(), "{ ... }")
	}
	if r.Typedef {
		return r.CName
	}
	return r.Keyword() + " " + r.CName
}

// Member is a direct member of a record. Offsets are relative to the record.
type Member struct {
	Name     string // empty for an anonymous struct or union member
	Type     *Type
	Offset   int64
	Flexible bool // flexible array member (T name[])
	Pos      Pos  // where it is declared: for errors, which name the member
}

// Enum is a C enum, named or anonymous.
type Enum struct {
	CName       string // tag, empty for an anonymous enum
	Pos         Pos
	Size        int64
	Signed      bool
	Enumerators []*Enumerator
	GoName      string // empty for anonymous enums: their constants take the underlying type
	Package     string
}

// Enumerator is one enumeration constant.
type Enumerator struct {
	Name   string
	Pos    Pos
	Value  uint64 // two's complement bits of the value
	GoName string
}

// Macro is an object-like macro with an integer value.
type Macro struct {
	Name    string
	Pos     Pos
	Value   uint64 // two's complement bits
	Size    int64
	Signed  bool
	Pointer bool   // a pointer-typed sentinel such as ((void *)-1): emitted as uintptr
	CType   string // C type of the value, for doc comments
	GoName  string
	Package string
}

// Alias is an object-like macro that renames a tag ("#define ibv_x ib_uverbs_x").
type Alias struct {
	Name    string
	Pos     Pos
	Record  *Record // exactly one of Record and Enum is set
	Enum    *Enum
	GoName  string
	Package string
}

// FuncKind tells how a stub reaches a C function.
type FuncKind int

const (
	FuncExtern FuncKind = iota // a prototype, resolved by the linker
	FuncInline                 // a static inline function in the header
	FuncMacro                  // a function-like macro expanding to a call
)

func (k FuncKind) String() string {
	return [...]string{"extern", "static inline", "function-like macro"}[k]
}

// Func is a function the generated package exposes as a cgo stub.
type Func struct {
	Name   string
	Pos    Pos
	Kind   FuncKind
	Params []*Param
	Result *Type
	// ResultSpelling is the declaration of the result as the header
	// spells it, qualifiers included, around the function's name and
	// parameter list; zero where the header does not spell it itself.
	ResultSpelling Spelling
	// Target is, for a macro, the function its expansion calls.
	Target string
	// Calls is, for a static inline (and a macro expanding to one), every
	// name its body calls, directly or through the other inlines it calls,
	// sorted (builtins and libc included): the package library's externs
	// among them are what it needs from that library.
	Calls []string
	// Convention is how the function reports failure (AssignConventions),
	// and ConventionRule the name of the rule of the table that said so;
	// NegativeCode and Unsupported are that rule's (ConventionRule).
	Convention     Convention
	ConventionRule string
	NegativeCode   bool
	Unsupported    string
	// NoRDMA, set from the package's NoRDMA table, is the failure of the
	// function that means this host has no RDMA to offer; nil for most.
	NoRDMA *NoRDMA

	GoName  string
	Package string
}

// Param is a function parameter.
type Param struct {
	Name string
	Type *Type
	// Spelling is the parameter's declaration as the header spells it,
	// qualifiers included, around its name; zero where unknown.
	Spelling Spelling
	GoName   string
}

// Spelling is a C declaration as a header writes it, split around the
// declared name: Before + name + After. Type records no qualifiers, so a C
// wrapper in the cgo preamble declares its parameters and result with
// these (see wrapperDecl): spelled from Type, const char *const *p comes
// out char **p, which gcc 14 and later refuse to pass on.
type Spelling struct {
	Before, After string
}

// Around declares name with s; "" for the zero Spelling.
func (s Spelling) Around(name string) string {
	if s.Before == "" {
		return ""
	}
	return s.Before + name + s.After
}

// Skip records a declaration the generator could not express, and why.
type Skip struct {
	Kind   string // "macro", "function", ...
	Name   string
	Pos    Pos
	Reason string
}

// IR is everything the generator emits, each list sorted by source position.
type IR struct {
	Version string // rdma-core version the headers come from, "" if unknown
	Headers []string
	// Read are the target headers the IR was made from, with their
	// digests (Loaded.Read): the layout test checks, when it runs, that the
	// headers it compiles against are still these.
	Read    []HeaderDigest
	Records []*Record // every record the Go side declares, top-level first then nested, by position
	Enums   []*Enum
	Macros  []*Macro
	Aliases []*Alias
	Funcs   []*Func
	// Shadowed are extern prototypes hidden behind a function-like macro of
	// the same name (ibv_query_port, ibv_reg_mr): C callers get the macro,
	// so they have no stub, but the macro's expansion still calls them, so
	// the loader defines them.
	Shadowed []*Func
	Skipped  []Skip
	// StalePatches are naming patches and convention rule entries that
	// matched nothing in this header set: harmless (another rdma-core
	// version may need them), but reported.
	StalePatches []string
	// Warnings are what a user should see on every run, not only in a
	// report: the rules of their conventions file that matched nothing
	// here, a misspelt name likelier than not ("FILE:LINE: NAME matches
	// no function in these headers").
	Warnings []string
	// NoConvention are the functions (of Funcs and Shadowed) that no
	// convention rule lists, in source order, which generation fails on
	// (AssignConventions); nil when no rules were applied (a layout-only
	// run).
	NoConvention []*Func
}
