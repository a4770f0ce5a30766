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
