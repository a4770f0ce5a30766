package gen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// TestAnonymousInArrays: an anonymous struct reached through arrays is
// named in C with one [0] per array level, so that the layout assertions
// gcc compiles measure the struct, not an array of it.
func TestAnonymousInArrays(t *testing.T) {
	const header = "struct ibv_g {\n\tint n;\n\tstruct { int a; char b; } grid[2][3];\n\tstruct { short c; } row[4];\n};\n"
	dir := includeDir(t, map[string]string{"infiniband/verbs.h": header})
	ir := modelOf(t, dir, []string{"infiniband/verbs.h"})
	if err := gen.Names(ir, gen.Packages()); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"__typeof__(((struct ibv_g *)0)->grid[0][0])": true,
		"__typeof__(((struct ibv_g *)0)->row[0])":     true,
	}
	var asserts strings.Builder
	asserts.WriteString("#include <infiniband/verbs.h>\n")
	for _, r := range ir.Records {
		if r.Parent == nil {
			continue
		}
		if !want[r.CType()] {
			t.Errorf("anonymous record %s spelled %s", r.Describe(), r.CType())
		}
		if r.GoName != "GGrid" && r.GoName != "GRow" {
			t.Errorf("anonymous record %s is named %s in Go", r.Describe(), r.GoName)
		}
		delete(want, r.CType())
		fmt.Fprintf(&asserts, "_Static_assert(sizeof(%s) == %d, \"size\");\n", r.CType(), r.Size)
	}
	for w := range want {
		t.Errorf("no anonymous record spelled %s", w)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on PATH to compile the spellings")
	}
	src := filepath.Join(t.TempDir(), "asserts.c")
	if err := os.WriteFile(src, []byte(asserts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-fsyntax-only", "-I", dir, src).CombinedOutput(); err != nil {
		t.Errorf("gcc rejects the spellings: %v\n%s\n%s", err, out, asserts.String())
	}
}

// TestTrailingZeroSize: Go pads a struct after a final zero-size field, C
// does not, so a struct that ends in one (an empty struct, or a union of
// __DECLARE_FLEX_ARRAYs) is refused, naming it at its line (an anonymous
// one's is its struct's: cc/v4 keeps no position for it); one whose
// zero-size member is followed by a field or by padding is laid out. Two
// members that Go would name alike are refused at the second one's line.
func TestTrailingZeroSize(t *testing.T) {
	const empty = "struct ibv_e {};\n"
	for _, tc := range []struct {
		name, src string
		want      string // regexp; empty: no error
	}{
		{"empty struct last", empty + "struct ibv_h {\n\tint a;\n\tstruct ibv_e e;\n};\n",
			`^infiniband/verbs\.h:4: struct ibv_h: member e ends it with zero size, after which Go pads the struct \(C does not\): no Go layout matches$`},
		{"flexible arrays in a union last", "struct ibv_f {\n\tint n;\n\tunion {\n\t\tstruct { struct { } __empty_a; int a[]; };\n\t\tstruct { struct { } __empty_b; char b[]; };\n\t};\n};\n",
			`^infiniband/verbs\.h:1: struct ibv_f: member \(anonymous union @4\) ends it with zero size`},
		{"members named alike", "struct ibv_d {\n\tint x;\n\tunion {\n\t\tint y;\n\t\tint _x;\n\t};\n};\n",
			`^infiniband/verbs\.h:5: struct ibv_d: members x and _x both become X$`},
		{"empty struct first", empty + "struct ibv_k {\n\tstruct ibv_e e;\n\tint a;\n};\n", ""},
		{"empty struct before padding", empty + "struct ibv_p {\n\tlong l;\n\tint a;\n\tstruct ibv_e e;\n};\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := includeDir(t, map[string]string{"infiniband/verbs.h": tc.src, "rdma/rdma_cma.h": "", "rdma/rdma_verbs.h": ""})
			_, err := gen.Build(gen.Config{Headers: dir, ImportRoot: "example.com/generated", LayoutOnly: true, Version: "1.0"})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error: %v", err)
			case tc.want != "" && (err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error())):
				t.Errorf("error\n\t%v\ndoes not match\n\t%s", err, tc.want)
			}
		})
	}
}

// TestEnumSignAsGCC: an enum is signed exactly when gcc makes it signed,
// when one of its values is negative. cc/v4 made every enum with a value
// of 2^63 or more long, where gcc makes it unsigned long, and the constants
// came out negative (IBV_U64_MAX was -1 in Go); the layout test compares
// bits, so it could not tell. The anonymous enum of a member, and a macro
// naming such an enumerator, take the same sign. gcc checks the lot.
func TestEnumSignAsGCC(t *testing.T) {
	const header = `enum ibv_u64 { IBV_U64_MAX = 0xFFFFFFFFFFFFFFFFULL, IBV_U64_ONE = 1 };
enum ibv_u64_next { IBV_U64_NEXT_A = 0xFFFFFFFFFFFFFFFEULL, IBV_U64_NEXT_B };
enum ibv_top { IBV_TOP = 1ULL << 63 };
enum ibv_cross { IBV_CROSS_A = (1UL << 63) - 1, IBV_CROSS_B };
enum ibv_s64 { IBV_S64_NEG = -1, IBV_S64_BIG = 0xFFFFFFFFULL };
enum ibv_s32 { IBV_S32_NEG = -2, IBV_S32_NEXT };
enum ibv_u32 { IBV_U32_TOP = 0x80000000, IBV_U32_ONE = 1 };
struct ibv_m { enum { IBV_ANON_TOP = 1ULL << 63 } e; };
#define IBV_REF_MAX IBV_U64_MAX
#define IBV_REF_BIG IBV_S64_BIG
#define IBV_REF_ONE (IBV_U32_ONE)
#define IBV_LONG_CAST ((long)0xFFFFFFFFFFFFFFFFULL)
`
	dir := includeDir(t, map[string]string{"infiniband/verbs.h": header})
	ir := modelOf(t, dir, []string{"infiniband/verbs.h"})
	wantSigned := map[string]bool{"ibv_u64": false, "ibv_u64_next": false, "ibv_top": false, "ibv_cross": false,
		"ibv_s64": true, "ibv_s32": true, "ibv_u32": false, "": false}
	var asserts strings.Builder
	asserts.WriteString("#include <infiniband/verbs.h>\n")
	for _, e := range ir.Enums {
		want, ok := wantSigned[e.CName]
		if !ok {
			t.Errorf("unexpected enum %q", e.CName)
			continue
		}
		if e.Signed != want {
			t.Errorf("enum %q: signed %v, want %v", e.CName, e.Signed, want)
		}
		ctype := "enum " + e.CName
		if e.CName == "" {
			ctype = "__typeof__(((struct ibv_m *)0)->e)"
		}
		fmt.Fprintf(&asserts, "_Static_assert(((%s)-1 < 0) == %d, \"sign of %s\");\n", ctype, b2i(e.Signed), ctype)
		fmt.Fprintf(&asserts, "_Static_assert(sizeof(%s) == %d, \"size of %s\");\n", ctype, e.Size, ctype)
	}
	for _, r := range ir.Records {
		if r.CName != "ibv_m" {
			continue
		}
		if ty := r.Members[0].Type; ty.Signed || ty.Enum == nil || ty.Enum.Signed {
			t.Errorf("member e of struct ibv_m: signed %v (its enum's: %v), want unsigned", ty.Signed, ty.Enum != nil && ty.Enum.Signed)
		}
	}
	wantMacro := map[string]struct {
		value  uint64
		signed bool
	}{"IBV_REF_MAX": {1<<64 - 1, false}, "IBV_REF_BIG": {0xFFFFFFFF, true}, "IBV_LONG_CAST": {1<<64 - 1, true},
		"IBV_REF_ONE": {1, true}} // an enumerator that fits int is an int, whatever its enum
	for _, m := range ir.Macros {
		w, ok := wantMacro[m.Name]
		if !ok {
			continue
		}
		delete(wantMacro, m.Name)
		if m.Value != w.value || m.Signed != w.signed {
			t.Errorf("macro %s: value %#x signed %v, want %#x signed %v", m.Name, m.Value, m.Signed, w.value, w.signed)
		}
		fmt.Fprintf(&asserts, "_Static_assert(((__typeof__(%s))-1 < 0) == %d, \"sign of %s\");\n", m.Name, b2i(m.Signed), m.Name)
		fmt.Fprintf(&asserts, "_Static_assert(sizeof(%s) == %d, \"size of %s\");\n", m.Name, m.Size, m.Name)
	}
	for n := range wantMacro {
		t.Errorf("macro %s not modelled", n)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on PATH to check the signs against")
	}
	src := filepath.Join(t.TempDir(), "asserts.c")
	if err := os.WriteFile(src, []byte(asserts.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-fsyntax-only", "-I", dir, src).CombinedOutput(); err != nil {
		t.Errorf("gcc disagrees: %v\n%s\n%s", err, out, asserts.String())
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSpellings: the preamble's C wrappers declare parameters and results
// as the header spells them, every const kept (the IR's types keep none):
// each spelling, put back around the function's own name, must redeclare
// it compatibly, which gcc checks strictly (a const dropped below the top
// level is "conflicting types").
func TestSpellings(t *testing.T) {
	const header = `struct ibv_s { int x; };
typedef int ibv_fn_t(const char *s);
const char *const *
ibv_a(const char *const *names, char *const stop);
int (*ibv_b(const unsigned (*grid)[4], int))[4];
ibv_fn_t ibv_c;
static inline __attribute__((deprecated)) const struct ibv_s *ibv_d(void) { return 0; }
void ibv_e(const char *(*)[2], const struct ibv_s **, volatile int *restrict);
static inline int ibv_f(register const char *p) { return *p; }
`
	want := map[string][]string{ // the result around X, then each parameter around its name or N
		"ibv_a": {"const char *const *X", "const char *const *names", "char *const stop"},
		"ibv_b": {"int (*X)[4]", "const unsigned (*grid)[4]", "int N"},
		"ibv_c": {"", ""},
		"ibv_d": {"const struct ibv_s *X"},
		"ibv_e": {"void X", "__typeof__(const char *(*)[2]) N", "const struct ibv_s **N", "volatile int *restrict N"},
		"ibv_f": {"int X", "const char *p"},
	}
	dir := includeDir(t, map[string]string{"infiniband/verbs.h": header})
	ir := modelOf(t, dir, []string{"infiniband/verbs.h"})
	var redecl strings.Builder
	redecl.WriteString("#include <infiniband/verbs.h>\n")
	for _, fn := range ir.Funcs {
		w, ok := want[fn.Name]
		if !ok {
			t.Errorf("unexpected function %s", fn.Name)
			continue
		}
		delete(want, fn.Name)
		got := []string{fn.ResultSpelling.Around("X")}
		var params []string
		for _, p := range fn.Params {
			name := p.Name
			if name == "" {
				name = "N"
			}
			got = append(got, p.Spelling.Around(name))
			params = append(params, p.Spelling.Around(fmt.Sprintf("p%d", len(params))))
		}
		if strings.Join(got, " | ") != strings.Join(w, " | ") {
			t.Errorf("%s spelled\n  %s\nwant\n  %s", fn.Name, strings.Join(got, " | "), strings.Join(w, " | "))
		}
		if got[0] == "" {
			continue
		}
		if len(params) == 0 {
			params = []string{"void"}
		}
		fmt.Fprintf(&redecl, "%s;\n", fn.ResultSpelling.Around(fn.Name+"("+strings.Join(params, ", ")+")"))
	}
	for n := range want {
		t.Errorf("no function %s in the IR", n)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on PATH to compile the spellings")
	}
	src := filepath.Join(t.TempDir(), "redecl.c")
	if err := os.WriteFile(src, []byte(redecl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-fsyntax-only", "-Werror", "-I", dir, src).CombinedOutput(); err != nil {
		t.Errorf("gcc rejects the spellings: %v\n%s\n%s", err, out, redecl.String())
	}
}
