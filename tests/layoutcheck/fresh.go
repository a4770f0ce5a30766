package layoutcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Oracle is how a layout test compiles its C side afresh: Header is the
// generated header holding the rows (zlayout_rows.h), in the package
// directory, where go test runs the test; CFlags are the include flags its
// cgo file compiles with (relative paths are relative to the package
// directory), or, for a package that compiles against the machine's
// headers, -I of the directory TestHeaders reads.
type Oracle struct {
	Header string
	CFlags []string
}

// FreshRows compiles o.Header with a main that prints its rows, outside Go's
// build cache, runs it and returns the rows. It compiles as cgo would: with
// $CC (gcc if unset), the package directory first on the include path, then
// $CGO_CPPFLAGS, $CGO_CFLAGS and o.CFlags. The error says which step
// failed, and that no C compiler was found if none was.
func FreshRows(o Oracle) ([]Row, error) {
	pkgDir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(pkgDir, o.Header)); err != nil {
		return nil, fmt.Errorf("the C side %s is not in %s, where the test runs: %v", o.Header, pkgDir, err)
	}
	cc := strings.Fields(os.Getenv("CC"))
	from := "$CC"
	if len(cc) == 0 {
		cc, from = []string{"gcc"}, "the default (CC is unset)"
	}
	if _, err := exec.LookPath(cc[0]); err != nil {
		return nil, fmt.Errorf("no C compiler: %s, %s, is not found: %v", cc[0], from, err)
	}
	tmp, err := os.MkdirTemp("", "goverbs-layout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	main := "#include \"" + o.Header + "\"\n#include <stdio.h>\n\n" +
		"int main(void) {\n\tint n, i;\n\tconst struct goverbs_row *r = goverbs_layout_rows(&n);\n" +
		"\tfor (i = 0; i < n; i++)\n\t\tprintf(\"%s\\t%llu\\n\", r[i].key, r[i].value);\n\treturn 0;\n}\n"
	src, bin := filepath.Join(tmp, "rows.c"), filepath.Join(tmp, "rows")
	if err := os.WriteFile(src, []byte(main), 0o644); err != nil {
		return nil, err
	}
	args := append([]string(nil), cc[1:]...)
	args = append(args, "-I", pkgDir)
	args = append(args, strings.Fields(os.Getenv("CGO_CPPFLAGS"))...)
	args = append(args, strings.Fields(os.Getenv("CGO_CFLAGS"))...)
	args = append(args, o.CFlags...)
	args = append(args, "-o", bin, src)
	cmd := exec.Command(cc[0], args...)
	cmd.Dir = pkgDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compiling %s afresh: %s %s: %v\n%s", o.Header, cc[0], strings.Join(args, " "), err, firstLines(out, 20))
	}
	var stderr bytes.Buffer
	run := exec.Command(bin)
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		return nil, fmt.Errorf("running the freshly compiled %s: %v\n%s", o.Header, err, firstLines(stderr.Bytes(), 20))
	}
	var rows []Row
	sc := bufio.NewScanner(bytes.NewReader(out))
	for line := 1; sc.Scan(); line++ {
		key, val, ok := strings.Cut(sc.Text(), "\t")
		v, err := strconv.ParseUint(val, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("the freshly compiled %s printed, line %d, %q: want key<TAB>value", o.Header, line, sc.Text())
		}
		rows = append(rows, Row{Key: key, Value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("the freshly compiled " + o.Header + " printed no rows")
	}
	return rows, nil
}

// firstLines is at most n lines of b.
func firstLines(b []byte, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "")
}

// CheckLayout is Check of c(), the C side compiled into the test, and g,
// while the headers in dir are the ones the layouts were generated from
// (want). When they are not, c() proves nothing: Go's build cache keys on
// neither headers outside the module nor C_INCLUDE_PATH or CPATH, so the
// test binary may hold a C side compiled against the old headers. The C
// side is then compiled afresh against the headers in dir (FreshRows) and
// its rows compared with g, so that every fact that changed is named, as a
// cold build would; if that compile fails, t fails saying so, and
// TestHeaders' failure names the header. Normal runs compile nothing.
func CheckLayout(t testing.TB, version, dir string, want []Header, o Oracle, c func() []Row, g []Row) {
	t.Helper()
	stale := StaleHeaders(dir, want)
	if len(stale) == 0 {
		Check(t, version, c(), g)
		return
	}
	rows, err := FreshRows(o)
	if err != nil {
		t.Fatalf("%s; the C side compiled into this test may predate that header (the build cache does not key on it), and compiling it afresh to name what changed failed: %v", stale[0], err)
	}
	t.Logf("%s: comparing the Go side with the C side compiled afresh against the headers in %s, not the one compiled into this test", stale[0], dir)
	if n := len(Diff(c(), rows)); n > 0 {
		t.Logf("the C side compiled into this test predates these headers (%d facts differ from the fresh one's): the build cache held it", n)
	} else {
		t.Logf("the C side compiled into this test agrees with the fresh one")
	}
	Check(t, version, rows, g)
}
