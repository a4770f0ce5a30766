package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// Pointers a stub passes to C without cgo's pointer check.
//
// cgo checks each pointer argument whose C type points to something that
// may hold pointers: about 10 ns each, and for a pointer into a Go heap
// object a scan of the whole object (an out-parameter inside a slice of
// 100 structs cost 65-70 us a call). It checks no pointer to a type that
// cannot hold one, so a stub passes these arguments as a pointer to
// uncheckedType, a byte, through a preamble wrapper that casts each back
// to the type the header spells:
//
//   - every pointer parameter of a data-path function (PackageSpec.DataPath):
//     its records, buffers and chains are C memory by contract, and the
//     check is most of what the generated data path costs over C's;
//   - everywhere, a pointer to a pointer to a record (struct ibv_cq **,
//     struct rdma_cm_id **): mostly an out-parameter, a slot C writes a
//     handle of its own into, where the check protects nothing; else an
//     array C made (ibv_free_device_list's list), which is C memory.
//
// They stay pointers, not uintptr_t: Go keeps the object they point to
// alive during the call, and when the goroutine's stack grows before the
// call reaches C (the cgo wrapper's own prologue can grow it) Go adjusts a
// pointer to a local, where an address passed as an integer would still
// name the old stack, which C would then write into. With #cgo noescape and
// nocallback (the data path) such a local stays on the stack; without them
// (elsewhere) it escapes to the heap, as any pointer argument does.
//
// Function pointers, and pointers to them, keep their own handling (a
// wrapper takes them as void *, see cDecl).

// uncheckedType is the C type the wrappers take an unchecked pointer to.
const uncheckedType = "goverbs_unchecked"

// uncheckedTypedef declares uncheckedType in a preamble that uses it.
const uncheckedTypedef = "// goverbs_unchecked is what the wrappers below take a pointer to where cgo's\n" +
	"// pointer check would protect nothing: cgo checks a pointer argument only when\n" +
	"// what it points to may hold pointers, which a byte cannot. Each wrapper casts\n" +
	"// the pointer back to the type the header declares.\n" +
	"typedef unsigned char " + uncheckedType + ";\n"

// unchecked reports whether fn's stub passes parameter p to C unchecked.
func (s *PackageSpec) unchecked(fn *Func, p *Param) bool {
	if p.Type.Kind != KPointer || reachesFuncPtr(p.Type) {
		return false
	}
	return s.isDataPath(fn.Name) || isHandleSlot(p.Type)
}

// isHandleSlot reports whether t is a pointer to a pointer to a record.
func isHandleSlot(t *Type) bool {
	return t.Kind == KPointer && t.Elem.Kind == KPointer && t.Elem.Elem.Kind == KRecord
}

// hasUnchecked reports whether fn's stub passes any parameter unchecked.
func (s *PackageSpec) hasUnchecked(fn *Func) bool {
	for _, p := range fn.Params {
		if s.unchecked(fn, p) {
			return true
		}
	}
	return false
}

// wrapped reports whether fn's stub calls a wrapper of the preamble: cgo
// cannot call a macro, an errno copier's errno is made positive first
// (ErrnoCopiers), and unchecked pointers come in as uncheckedType.
func (s *PackageSpec) wrapped(fn *Func) bool {
	return fn.Kind == FuncMacro || copiesErrno(fn) || s.hasUnchecked(fn)
}

// cName is the C function fn's stub calls: its wrapper or the function.
func (s *PackageSpec) cName(fn *Func) string {
	if s.wrapped(fn) {
		return "goverbs_" + fn.Name
	}
	return fn.Name
}

// takesPointer reports whether fn has a pointer parameter (an argument
// #cgo noescape and nocallback can keep on the stack).
func takesPointer(fn *Func) bool {
	for _, p := range fn.Params {
		if p.Type.Kind == KPointer || p.Type.Kind == KFuncPtr {
			return true
		}
	}
	return false
}

// wrapperParamName is the name of parameter i in fn's wrapper: its own,
// or for a prototype that leaves it unnamed, one of the wrapper's.
func wrapperParamName(p *Param, i int) string {
	if p.Name == "" {
		return fmt.Sprintf("goverbs_p%d", i)
	}
	return p.Name
}

// castType is the C type name an unchecked parameter is cast back to: the
// header's own spelling, qualifiers included (const char *const * passed
// as char ** does not compile with gcc 14), or the IR's where the header
// does not spell it. A parameter declared as an array (T a[], T a[][4]) is
// a pointer to its element (T *, T (*)[4]).
func castType(p *Param) string {
	s := p.Spelling
	if s.Before == "" {
		return cDecl(p.Type, "")
	}
	after := strings.TrimSpace(s.After)
	if rest, ok := strings.CutPrefix(after, "["); ok {
		if _, rest, _ = strings.Cut(rest, "]"); rest == "" {
			return strings.TrimSpace(s.Before) + " *"
		}
		return strings.TrimSpace(s.Before) + " (*)" + rest
	}
	return strings.TrimSpace(s.Before + after)
}

// pointerRules writes the package comment's rules for pointer arguments:
// what cgo checks, what the stubs pass unchecked (and so leave to the
// caller), and how each case reads in a program.
func pointerRules(f *jen.File, spec *PackageSpec, funcs []*Func) {
	var dataPath []string
	for _, p := range spec.DataPath {
		if strings.HasSuffix(p, "_") {
			p += "*"
		}
		dataPath = append(dataPath, p)
	}
	hasData, hasSlot := false, false
	for _, fn := range funcs {
		for _, p := range fn.Params {
			if spec.unchecked(fn, p) {
				hasData = hasData || spec.isDataPath(fn.Name)
				hasSlot = hasSlot || isHandleSlot(p.Type)
			}
		}
	}
	para := func(text string) {
		f.PackageComment("")
		for _, line := range strings.Split(wrapComment(text), "\n") {
			f.PackageComment(line)
		}
	}
	item := func(text string) {
		for i, line := range strings.Split(wrapWidth(text, 72), "\n") {
			if i == 0 {
				f.PackageComment("  - " + line)
			} else {
				f.PackageComment("    " + line)
			}
		}
	}
	para("Pointers. cgo checks a pointer argument whose type may hold pointers: it looks through the whole " +
		"Go object the argument points into and panics (\"argument of cgo function has Go pointer to unpinned " +
		"Go pointer\") if it finds an unpinned Go pointer there. What that means here:")
	f.PackageComment("")
	item("A pointer to a package-level variable of a struct type with pointer fields panics at the call " +
		"even when every pointer field is nil: Go cannot tell where an object in the data or bss section " +
		"ends, so it assumes the worst. Pass a local copy, or memory from cmem.New.")
	if hasData {
		item("The data-path stubs (" + strings.Join(dataPath, ", ") + ") check none of their pointers: " +
			"that is what makes them cost about what C does. cgo's rules stay: a work request on the Go heap " +
			"that points at a Go SGE breaks them, and nothing says so. Keep work-request chains, SGEs and " +
			"WC arrays in C memory (cmem.New, cmem.NewSlice); a local passed by address, such as a bad_wr " +
			"slot, stays on the stack and costs nothing.")
	}
	if hasSlot {
		item("A pointer to a handle pointer (an out-parameter such as **CMID or **CQ, which C fills with " +
			"a handle of its own, or a list C made, such as ibv_get_device_list's) is passed unchecked " +
			"by every stub, so a slot inside a large Go object, &nodes[i].id, costs no scan of it. What it " +
			"points at must hold C pointers only.")
	}
	para("Handle arguments (*QP, *CQ, *CMID ...) must not be nil: a nil handle crashes inside C, as in C.")
}
