package layoutcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Diff names each disagreement once: a value, a row one side lacks, and a
// row one side has twice, whose second value would otherwise hide the
// first's mismatch.
func TestDiff(t *testing.T) {
	c := []Row{{"sizeof(struct a)", 8}, {"offsetof(struct a, x)", 4}, {"enum A", 1}, {"enum A", 2}}
	g := []Row{{"sizeof(struct a)", 16}, {"enum A", 2}, {"macro M", 3}}
	want := []string{
		"enum A: C has the row twice",
		"macro M: Go has 3, C has no such row",
		"offsetof(struct a, x): C has 4, Go has no such row",
		"sizeof(struct a): C says 8, Go says 16",
	}
	if got := Diff(c, g); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff =\n%q\nwant\n%q", got, want)
	}
	if got := Diff(c[:2], c[:2]); len(got) != 0 {
		t.Errorf("Diff of a table with itself = %q, want nothing", got)
	}
	b := []Row{{"enum B", 1}}
	if got := Diff(b, append(b, b...)); !reflect.DeepEqual(got, []string{"enum B: Go has the row twice"}) {
		t.Errorf("Diff with a Go row twice = %q", got)
	}
}

// Signed tells the signedness the bits of Int cannot: int64 -1 and uint64
// 0xffffffffffffffff are the same row value, and Count files its rows apart.
func TestSigned(t *testing.T) {
	type status uint32
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"int8", Signed(int8(0)), 1},
		{"int64 -1", Signed(int64(-1)), 1},
		{"uint64 max", Signed(^uint64(0)), 0},
		{"uintptr", Signed(uintptr(0)), 0},
		{"a named uint32", Signed(status(0)), 0},
	} {
		if c.got != c.want {
			t.Errorf("Signed(%s) = %d, want %d", c.name, c.got, c.want)
		}
	}
	if Int(int64(-1)) != Int(^uint64(0)) {
		t.Error("Int(int64(-1)) and Int(^uint64(0)) differ: the sign rows would not be needed")
	}
	rows := []Row{{"enum A", 1}, {"signed(enum a)", 0}, {"macro M", 2}, {"signed(macro M)", 1}}
	if got, want := Count(rows), (Counts{Enumerators: 1, Macros: 1, Signs: 2}); got != want {
		t.Errorf("Count = %+v, want %+v", got, want)
	}
}

// StaleHeaders names, in the generated list's order, each header whose
// bytes differ from its digest and each that is gone.
func TestStaleHeaders(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("infiniband/verbs.h", "struct a { int x; };\n")
	write("infiniband/sa.h", "struct b { int y; };\n")
	notItsSum := strings.Repeat("0", 64)
	got := StaleHeaders(dir, []Header{{"infiniband/verbs.h", notItsSum}, {"rdma/gone.h", notItsSum}})
	if len(got) != 2 || !strings.HasPrefix(got[0], "header infiniband/verbs.h in "+dir+" differs from the one the layouts were generated from") ||
		got[1] != "header rdma/gone.h is gone from "+dir {
		t.Errorf("StaleHeaders = %q", got)
	}
	sum := sha256.Sum256([]byte("struct b { int y; };\n"))
	if got := StaleHeaders(dir, []Header{{"infiniband/sa.h", hex.EncodeToString(sum[:])}}); len(got) != 0 {
		t.Errorf("StaleHeaders of an unchanged header = %q, want nothing", got)
	}
}

// FreshRows compiles the rows header of the directory the test runs in with
// $CC, runs it and reads its rows; with no compiler, or a header that does
// not compile, it says which.
func TestFreshRows(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: FreshRows compiles C")
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "inc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "inc", "a.h"), []byte("struct a { char c; long long x; };\nenum { A_NEG = -2 };\n"), 0o644))
	rowsHeader := "#include <a.h>\n#include <stddef.h>\nstruct goverbs_row { const char *key; unsigned long long value; };\n" +
		"static const struct goverbs_row *goverbs_layout_rows(int *n) {\n\tstatic const struct goverbs_row rows[] = {\n" +
		"\t\t{\"offsetof(struct a, x)\", (unsigned long long)(__builtin_offsetof(struct a, x))},\n" +
		"\t\t{\"enum A_NEG\", (unsigned long long)(A_NEG)},\n\t};\n\t*n = sizeof(rows) / sizeof(rows[0]);\n\treturn rows;\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zrows.h"), []byte(rowsHeader), 0o644))
	t.Chdir(dir)
	o := Oracle{Header: "zrows.h", CFlags: []string{"-Iinc"}}

	t.Setenv("CC", "")
	rows, err := FreshRows(o)
	require.NoError(t, err)
	require.Equal(t, []Row{{"offsetof(struct a, x)", 8}, {"enum A_NEG", Int(int64(-2))}}, rows)

	t.Setenv("CC", "goverbs-no-such-cc -O2")
	_, err = FreshRows(o)
	require.ErrorContains(t, err, "no C compiler: goverbs-no-such-cc, $CC, is not found")

	t.Setenv("CC", "gcc")
	_, err = FreshRows(Oracle{Header: "zrows.h"})
	require.ErrorContains(t, err, "compiling zrows.h afresh")
	require.ErrorContains(t, err, "a.h")
	_, err = FreshRows(Oracle{Header: "gone.h"})
	require.ErrorContains(t, err, "the C side gone.h is not in "+dir)
}
