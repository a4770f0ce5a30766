package gen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	l, err := gen.Load(dir, []string{"infiniband/verbs.h"})
	if err != nil {
		t.Fatal(err)
	}
	ir, err := gen.Model(l)
	if err != nil {
		t.Fatal(err)
	}
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
