package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for verbsgen (see runBinary), so
// the exit status and stderr are tested without building the command.
func TestMain(m *testing.M) {
	if os.Getenv("VERBSGEN_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"verbsgen"}, strings.Fields(os.Getenv("VERBSGEN_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// goodRoots are valid stand-ins for the three root headers.
var goodRoots = map[string]string{
	"infiniband/verbs.h": "#include <stdint.h>\nstruct ibv_thing {\n\tuint32_t a;\n\tuint64_t b;\n};\nint ibv_destroy_thing(struct ibv_thing *t);\n",
	"rdma/rdma_cma.h":    "#include <infiniband/verbs.h>\nstruct rdma_cm_thing {\n\tstruct ibv_thing t;\n};\n",
	"rdma/rdma_verbs.h":  "#include <rdma/rdma_cma.h>\nstatic inline int rdma_do(struct rdma_cm_thing *c) { return ibv_destroy_thing(&c->t); }\n",
}

// headerSet makes an include directory with the good roots, replaced or
// completed by files (a file whose content is "-" is left out).
func headerSet(t *testing.T, files map[string]string) string {
	t.Helper()
	return headerSetAt(t, t.TempDir(), files)
}

// headerSetAt is headerSet in directory dir.
func headerSetAt(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	all := map[string]string{}
	for p, c := range goodRoots {
		all[p] = c
	}
	for p, c := range files {
		all[p] = c
		if c == "-" {
			delete(all, p)
		}
	}
	for p, c := range all {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeOutput makes output directories as a previous run would have left
// them (stale content, old modification times) and returns the root, the
// -out and -layout directories.
func fakeOutput(t *testing.T) (root, out, layout string) {
	t.Helper()
	root = t.TempDir()
	out, layout = filepath.Join(root, "generated"), filepath.Join(root, "tests", "layout")
	for p, c := range map[string]string{
		"generated/doc.go":                  "// Package generated is hand-written.\npackage generated\n",
		"generated/verbs/zverbs_types.go":   "// old types\npackage verbs\n",
		"generated/verbs/zverbs_funcs.go":   "// old stubs\npackage verbs\n",
		"generated/rdmacm/zrdmacm_types.go": "// old types\npackage rdmacm\n",
		"generated/rdmacm/zrdmacm_funcs.go": "// old stubs\npackage rdmacm\n",
		"tests/layout/zlayout_c.go":         "// old oracle\npackage layout\n",
		"tests/layout/zlayout_go.go":        "// old table\npackage layout\n",
		"tests/layout/zlayout_test.go":      "// old test\npackage layout\n",
		"tests/layout/mutation_test.go":     "// hand-written\npackage layout\n",
	} {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, past, past)
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, out, layout
}

type entry struct {
	data  []byte
	mode  fs.FileMode
	mtime time.Time
}

func snapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	s := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode(), mtime: fi.ModTime()}
		if !d.IsDir() {
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		s[p] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unchanged fails unless root holds exactly what the snapshot recorded:
// same files, same bytes, same modes, same modification times, nothing new
// (no temporary files left behind).
func unchanged(t *testing.T, root string, before map[string]entry) {
	t.Helper()
	sameEntries(t, before, snapshot(t, root))
}

// unchangedFiles is unchanged but for the directories' modification times,
// which making and removing a directory or file in them changes.
func unchangedFiles(t *testing.T, root string, before map[string]entry) {
	t.Helper()
	after := snapshot(t, root)
	for _, s := range []map[string]entry{before, after} {
		for p, e := range s {
			if e.mode.IsDir() {
				e.mtime = time.Time{}
				s[p] = e
			}
		}
	}
	sameEntries(t, before, after)
}

func sameEntries(t *testing.T, before, after map[string]entry) {
	t.Helper()
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			t.Errorf("%s was removed", p)
		case !bytes.Equal(a.data, b.data):
			t.Errorf("%s was rewritten", p)
		case a.mode != b.mode:
			t.Errorf("%s changed mode", p)
		case !a.mtime.Equal(b.mtime):
			t.Errorf("%s changed modification time (%v -> %v)", p, b.mtime, a.mtime)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}

// TestBadInput: each bad header set makes run fail with one line naming the
// place, and leaves the output directories byte for byte and mtime for
// mtime as they were.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string // nil: the -headers directory does not exist
		report bool              // -report instead of writing
		want   string            // regexp; DIR is the -headers directory
	}{
		{name: "missing directory", want: `^headers directory DIR: no such file or directory$`},
		{name: "missing directory, report", report: true, want: `^headers directory DIR: no such file or directory$`},
		{name: "missing root header", files: map[string]string{"rdma/rdma_verbs.h": "-"},
			want: `^rdma/rdma_verbs\.h: header not found in DIR$`},
		{name: "syntax error", files: map[string]string{"infiniband/verbs.h": "struct ibv_a {\n\tint x = 1;\n};\n"},
			want: `^DIR/infiniband/verbs\.h:2:\d+: .+`},
		{name: "syntax error, report", report: true, files: map[string]string{"infiniband/verbs.h": "struct ibv_a {\n\tint x = 1;\n};\n"},
			want: `^DIR/infiniband/verbs\.h:2:\d+: .+`},
		{name: "syntax error in an included header", files: map[string]string{"rdma/rdma_cma.h": "#include <infiniband/verbs.h>\nint a;\nint b c;\n"},
			want: `^DIR/rdma/rdma_cma\.h:3:\d+: .+`},
		{name: "bit-field", files: map[string]string{"infiniband/verbs.h": "\n\nstruct ibv_bits {\n\tunsigned int a : 4;\n\tunsigned int b : 4;\n};\n"},
			want: `^infiniband/verbs\.h:4: struct ibv_bits member a: bit-fields are not supported$`},
		{name: "packed", files: map[string]string{"infiniband/verbs.h": "\nstruct ibv_packed {\n\tchar c;\n\tlong l;\n} __attribute__((packed));\n"},
			want: `^infiniband/verbs\.h:2: struct ibv_packed: __attribute__\(\(packed\)\) is not supported`},
		{name: "packed, report", report: true, files: map[string]string{"infiniband/verbs.h": "\nstruct ibv_packed {\n\tchar c;\n\tlong l;\n} __attribute__((__packed__));\n"},
			want: `^infiniband/verbs\.h:2: struct ibv_packed: __attribute__\(\(packed\)\) is not supported`},
		{name: "name collision", files: map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "struct ibv_twin { int a; };\n#define IBV_TWIN 1\n"},
			want: `^infiniband/verbs\.h:8: macro IBV_TWIN and struct ibv_twin \(infiniband/verbs\.h:7\) both become verbs\.Twin`},
		// Every function gets an error-convention decision: a new one fails
		// with its file:line until a conventions file (or, in goverbs,
		// gen.Conventions) lists it. -report lists them (TestReportMissingConventions).
		{name: "function without an error convention", files: map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "int ibv_brand_new(void);\n"},
			want: `^infiniband/verbs\.h:7: ibv_brand_new returns int and has no error convention: give it one in a conventions file \(verbsgen -conventions FILE\), a line "ibv_brand_new CONVENTION"`},
		{name: "convention that does not fit", files: map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "void *ibv_destroy_everything(void);\n"},
			want: `infiniband/verbs\.h:7: ibv_destroy_everything returns void \*, which convention "errno returned" of rule "verbs returning their errno" \(entry "ibv_destroy_\*"\) cannot describe`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := filepath.Join(t.TempDir(), "no-such-headers")
			if tc.files != nil {
				headers = headerSet(t, tc.files)
			}
			root, out, layout := fakeOutput(t)
			before := snapshot(t, root)
			args := []string{"-headers", headers, "-out", out, "-layout", layout}
			if tc.report {
				args = append(args, "-report")
			}
			var stdout, stderr bytes.Buffer
			err := run(args, &stdout, &stderr)
			if err == nil {
				t.Fatalf("run succeeded; stdout:\n%s", stdout.String())
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line:\n%s", msg)
			}
			want := strings.ReplaceAll(tc.want, "DIR", regexp.QuoteMeta(headers))
			if !regexp.MustCompile(want).MatchString(msg) {
				t.Errorf("error\n\t%s\ndoes not match\n\t%s", msg, want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout is not empty:\n%s", stdout.String())
			}
			unchanged(t, root, before)
		})
	}
}

// TestHermetic: a header set missing one of rdma-core's headers is refused
// rather than completed from /usr/include; the kernel's rdma/ib_user_verbs.h
// is the one exception (no rdma-core package ships it).
func TestHermetic(t *testing.T) {
	for _, h := range []string{"rdma/ib_user_verbs.h", "rdma/ib_user_sa.h"} {
		if _, err := os.Stat(filepath.Join("/usr/include", h)); err != nil {
			t.Skipf("/usr/include/%s is missing (install linux-libc-dev): cannot test a header leaking in from the system", h)
		}
	}
	leaky := headerSet(t, map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "#include <rdma/ib_user_sa.h>\n"})
	root, out, layout := fakeOutput(t)
	before := snapshot(t, root)
	err := run([]string{"-headers", leaky, "-out", out, "-layout", layout}, &bytes.Buffer{}, &bytes.Buffer{})
	want := `^/usr/include/rdma/ib_user_sa\.h:\d+: declares \w+ but lies outside ` + regexp.QuoteMeta(leaky) + `: the header set is incomplete$`
	if err == nil || !regexp.MustCompile(want).MatchString(err.Error()) {
		t.Errorf("error\n\t%v\ndoes not match\n\t%s", err, want)
	}
	unchanged(t, root, before)

	allowed := headerSet(t, map[string]string{"infiniband/verbs.h": "#include <rdma/ib_user_verbs.h>\n" + goodRoots["infiniband/verbs.h"]})
	var stdout bytes.Buffer
	if err := run([]string{"-headers", allowed, "-report"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatalf("the kernel's rdma/ib_user_verbs.h was refused: %v", err)
	}
	if !strings.Contains(stdout.String(), "\nrdma/ib_user_verbs.h: ") {
		t.Errorf("the report has no line for rdma/ib_user_verbs.h:\n%s", stdout.String())
	}
}

// TestGoodInput: a valid header set is generated, reported, and a second
// run changes nothing.
func TestGoodInput(t *testing.T) {
	headers := headerSet(t, nil)
	root, out, layout := fakeOutput(t)
	args := []string{"-headers", headers, "-out", out, "-layout", layout, "-version", "0.0-test"}
	var stdout bytes.Buffer
	if err := run(args, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), "verbsgen: rdma-core 0.0-test: 10 files, 10 changed\n"; got != want {
		t.Errorf("first run printed %q, want %q", got, want)
	}
	before := snapshot(t, root)
	if b := before[filepath.Join(out, "doc.go")]; !bytes.Contains(b.data, []byte("hand-written")) {
		t.Error("the hand-written doc.go was touched")
	}
	stdout.Reset()
	if err := run(args, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got, want := stdout.String(), "verbsgen: rdma-core 0.0-test: 10 files, 0 changed\n"; got != want {
		t.Errorf("second run printed %q, want %q", got, want)
	}
	unchanged(t, root, before)

	stdout.Reset()
	if err := run([]string{"-headers", headers, "-report"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"infiniband/verbs.h: 1 structs/unions", "rdma/rdma_verbs.h: ", "skipped: 0\n"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, stdout.String())
		}
	}
}

// TestExitStatus runs the command itself: a bad header set exits with
// status 1 and one line on stderr.
func TestExitStatus(t *testing.T) {
	headers := headerSet(t, map[string]string{"infiniband/verbs.h": "int a;\nint b c;\n"})
	root, out, layout := fakeOutput(t)
	before := snapshot(t, root)
	stdout, stderr, code := runBinary(t, "-headers", headers, "-out", out, "-layout", layout)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout: %q", stdout)
	}
	want := `^verbsgen: ` + regexp.QuoteMeta(headers) + `/infiniband/verbs\.h:2:\d+: [^\n]+\n$`
	if !regexp.MustCompile(want).MatchString(stderr) {
		t.Errorf("stderr\n\t%q\ndoes not match\n\t%s", stderr, want)
	}
	unchanged(t, root, before)

	if _, stderr, code := runBinary(t, "-headers", headerSet(t, nil), "-report"); code != 0 {
		t.Errorf("a good header set: exit status %d, stderr %q", code, stderr)
	}
}

// runBinary runs this test binary as verbsgen with args (no spaces in them).
func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	for _, a := range args {
		if strings.ContainsAny(a, " \t\n") {
			t.Fatalf("argument %q has white space", a)
		}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "VERBSGEN_TEST_AS_MAIN=1", "VERBSGEN_TEST_ARGS="+strings.Join(args, " "))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestSwitchToLayoutOnly: a -layout-only run into the output of a full run
// removes the stubs and the loader that it no longer produces (they would
// otherwise go on calling into a package that no longer matches), and
// counts them as changed.
func TestSwitchToLayoutOnly(t *testing.T) {
	headers := headerSet(t, nil)
	_, out, layout := fakeOutput(t)
	args := []string{"-headers", headers, "-out", out, "-layout", layout, "-version", "0.0-test"}
	if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	stubs := []string{filepath.Join(out, "verbs", "zverbs_funcs.go"), filepath.Join(out, "verbs", "zverbs_load.c")}
	for _, p := range stubs {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the full run did not write %s: %v", p, err)
		}
	}
	var stdout bytes.Buffer
	if err := run(append(args, "-layout-only"), &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range stubs {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left beside the -layout-only output", p)
		}
	}
	if !regexp.MustCompile(`: \d+ files, [1-9]\d* changed\n$`).MatchString(stdout.String()) {
		t.Errorf("the -layout-only run printed %q", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, "doc.go")); err != nil {
		t.Errorf("the hand-written doc.go is gone: %v", err)
	}
}

// TestBadOutputDir: when an output directory cannot be made (-layout below
// a regular file), the run fails and removes the directories it had made
// for the other packages: the tree holds the same files as before.
func TestBadOutputDir(t *testing.T) {
	headers := headerSet(t, nil)
	root, out, _ := fakeOutput(t)
	afile := filepath.Join(root, "afile")
	if err := os.WriteFile(afile, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	newOut := filepath.Join(out, "new")
	err := run([]string{"-headers", headers, "-out", newOut, "-layout", filepath.Join(afile, "sub")}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "afile") {
		t.Errorf("error %v, want one naming afile", err)
	}
	unchangedFiles(t, root, before)
}

// TestBadVersion: a -version that could not be pasted into the files, and a
// -since-table that cannot be read, are errors naming what is wrong, before
// anything is written, not panics.
func TestBadVersion(t *testing.T) {
	unversioned := headerSet(t, nil)
	badTable := filepath.Join(t.TempDir(), "since.tsv")
	if err := os.WriteFile(badTable, []byte("ibv_destroy_thing\t1.0-x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // regexp
	}{
		{"release in -since-table not a number", []string{"-headers", unversioned, "-since-table", badTable},
			`^.*/since\.tsv:1: ibv_destroy_thing: release "1\.0-x" is not a dotted number such as 65\.0$`},
		{"no -since-table file", []string{"-headers", unversioned, "-since-table", badTable + ".absent"},
			`^open .*/since\.tsv\.absent: no such file or directory$`},
		{"quote in -version", []string{"-headers", unversioned, "-version", `1.0"x`},
			`^version "1\.0\\"x": not an rdma-core version \(letters, digits and \.\+~_- only\)$`},
		{"newline in -version", []string{"-headers", unversioned, "-version", "1.0\nx"},
			`^version "1\.0\\nx": not an rdma-core version`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, out, layout := fakeOutput(t)
			before := snapshot(t, root)
			err := run(append(tc.args, "-out", out, "-layout", layout), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("error\n\t%v\ndoes not match\n\t%s", err, tc.want)
			}
			unchanged(t, root, before)
		})
	}
}

// TestFlagMistakes: -h prints the usage and exits 0; arguments and flag
// combinations that would be silently ignored are errors.
func TestFlagMistakes(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"verify", "-h"}} {
		stdout, stderr, code := runBinary(t, args...)
		if code != 0 || stdout != "" || !strings.Contains(stderr, "Usage of verbsgen") || strings.Contains(stderr, "help requested") {
			t.Errorf("%v: exit status %d, stdout %q, stderr %q; want 0 and only the usage", args, code, stdout, stderr)
		}
	}
	headers := headerSet(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "-headers", headers, "-dir", t.TempDir(), "extra"}, "unexpected arguments: extra"},
		{[]string{"verify", "-headers", headers, "-dir", t.TempDir(), "-targets", "linux/riscv64"}, `unknown target "linux/riscv64" (known: linux/amd64, linux/arm64)`},
		{[]string{"-headers", headers, "-layout-only", "-since-table", headers}, "-since-table and -since-pinned date stubs, which -layout-only does not emit"},
		{[]string{"-headers", headers, "-layout-only", "-since-pinned"}, "-since-table and -since-pinned date stubs, which -layout-only does not emit"},
		{[]string{"-headers", headers, "-since-pinned", "-since-table", headers}, "-since-table and -since-pinned are two tables: give one"},
		{[]string{"-headers", headers, "-layout-import", "example.com/layout"}, "-layout-import needs -layout"},
		{[]string{"-headers", headers, "-layout-only", "-conventions", "vendor.conventions"}, "-conventions gives stubs their error conventions, which -layout-only does not emit"},
	} {
		root, out, _ := fakeOutput(t)
		before := snapshot(t, root)
		args := tc.args
		if args[0] != "verify" {
			args = append(args, "-out", out)
		}
		err := run(args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		unchanged(t, root, before)
	}
}

// vendoredWith copies goverbs' vendored header set (headers/vendored,
// rdma-core 65.0, its VERSION included) into a temporary directory, adds
// decls to infiniband/verbs.h inside its extern "C" block, as a vendor's
// additions would be, and returns the include directory and the line of
// each added declaration.
func vendoredWith(t *testing.T, decls ...string) (include string, lines []int) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vendored")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "headers", "vendored"))); err != nil {
		t.Fatal(err)
	}
	include = filepath.Join(dir, "include")
	verbs := filepath.Join(include, "infiniband", "verbs.h")
	b, err := os.ReadFile(verbs)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	const closing = "#ifdef __cplusplus\n}\n#endif\n"
	i := strings.LastIndex(src, closing)
	if i < 0 {
		t.Fatalf("%s has no closing extern \"C\" block to add declarations before", verbs)
	}
	first := strings.Count(src[:i], "\n") + 1
	for j := range decls {
		lines = append(lines, first+j)
	}
	src = src[:i] + strings.Join(decls, "\n") + "\n" + src[i:]
	if err := os.Chmod(verbs, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(verbs, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return include, lines
}

// writeConventions writes a conventions file and returns its path.
func writeConventions(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vendor.conventions")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const myVendorOp = "int ibv_my_vendor_op(struct ibv_context *ctx, uint32_t flags);"

// TestConventionsFile is a user's header set, goverbs' own plus a vendor
// function that gen.Conventions does not list: generation fails naming
// the function, its line and result type and telling what line to write,
// writing nothing; with a conventions file that has the line, it succeeds
// and the stub has the declared convention.
func TestConventionsFile(t *testing.T) {
	headers, lines := vendoredWith(t, myVendorOp)
	root, out, layout := fakeOutput(t)
	before := snapshot(t, root)
	args := []string{"-headers", headers, "-out", out, "-layout", layout}
	var stdout, stderr bytes.Buffer
	err := run(args, &stdout, &stderr)
	want := fmt.Sprintf(`infiniband/verbs.h:%d: ibv_my_vendor_op returns int and has no error convention: `+
		`give it one in a conventions file (verbsgen -conventions FILE), a line "ibv_my_vendor_op CONVENTION", `+
		`CONVENTION one of errno-result, minus-one-errno, count-or-error, getaddrinfo, cannot-fail `+
		`(those a result of type int fits: its documentation says which) (in goverbs itself: a rule of gen.Conventions)`, lines[0])
	if err == nil || err.Error() != want {
		t.Fatalf("without -conventions: error\n\t%v\nwant\n\t%s", err, want)
	}
	if stdout.Len()+stderr.Len() > 0 {
		t.Errorf("without -conventions: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	unchanged(t, root, before)

	conv := writeConventions(t, "# the vendor's additions to rdma-core\nibv_my_vendor_op errno-result\n")
	stdout.Reset()
	if err := run(append(args, "-conventions", conv), &stdout, &stderr); err != nil {
		t.Fatalf("with -conventions: %v", err)
	}
	if !regexp.MustCompile(`^verbsgen: rdma-core 65\.0: \d+ files, \d+ changed\n$`).MatchString(stdout.String()) || stderr.Len() > 0 {
		t.Errorf("with -conventions: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	stubs, err := os.ReadFile(filepath.Join(out, "verbs", "zverbs_funcs.go"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.ReplaceAll(string(stubs), "\n// ", " ")
	for _, w := range []string{
		fmt.Sprintf("MyVendorOp calls ibv_my_vendor_op (extern, infiniband/verbs.h:%d).", lines[0]),
		`When C returns an errno, it returns it as a *verberr.Error (error convention "errno returned", rule "vendor.conventions: ibv_my_vendor_op").`,
		"func MyVendorOp(ctx *Context, flags uint32) error {",
	} {
		if !strings.Contains(doc, w) {
			t.Errorf("zverbs_funcs.go lacks %q", w)
		}
	}
}

// TestConventionsFileMistakes: a wrong conventions file fails with one
// line naming its FILE:LINE (and the function's header line where a rule
// does not fit it), writing nothing; a rule that matches no function is
// a warning on stderr, and the run goes on.
func TestConventionsFileMistakes(t *testing.T) {
	headers := headerSet(t, map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "int ibv_brand_new(void);\n"})
	for _, tc := range []struct {
		name, conv, want string // want: FILE is the conventions file
	}{
		{"unknown convention", "\nibv_brand_new errno-returned\n",
			`FILE:2: ibv_brand_new: unknown convention "errno-returned" (want one of cannot-fail, null-errno, errno-result, minus-one-errno, count-or-error, getaddrinfo)`},
		{"malformed line", "ibv_brand_new: errno-result\n", `FILE:1: "ibv_brand_new:" is neither a C function name nor a prefix of one ending in *`},
		{"duplicate", "ibv_brand_new errno-result\nibv_brand_new errno-result\n", "FILE:2: ibv_brand_new is already given a convention at line 1"},
		{"does not fit", "# int, no pointer\nibv_brand_new null-errno\n",
			"FILE:2: ibv_brand_new null-errno does not fit ibv_brand_new (infiniband/verbs.h:7), which returns int: " +
				"it fits errno-result, minus-one-errno, count-or-error, getaddrinfo, cannot-fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv := writeConventions(t, tc.conv)
			root, out, layout := fakeOutput(t)
			before := snapshot(t, root)
			var stdout, stderr bytes.Buffer
			err := run([]string{"-headers", headers, "-out", out, "-layout", layout, "-conventions", conv}, &stdout, &stderr)
			if want := strings.ReplaceAll(tc.want, "FILE", conv); err == nil || err.Error() != want {
				t.Errorf("error\n\t%v\nwant\n\t%s", err, want)
			}
			unchanged(t, root, before)
		})
	}

	_, out, layout := fakeOutput(t)
	conv := writeConventions(t, "ibv_brand_new errno-result\nibv_brand_old errno-result\n")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-headers", headers, "-out", out, "-layout", layout, "-conventions", conv}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if got, want := stderr.String(), "verbsgen: warning: "+conv+":2: ibv_brand_old matches no function in these headers\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	// A misspelt rule explains a missing convention: the warning comes
	// with the error.
	conv = writeConventions(t, "ibv_brand_nwe errno-result\n")
	stderr.Reset()
	err := run([]string{"-headers", headers, "-out", out, "-layout", layout, "-conventions", conv}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "ibv_brand_new returns int and has no error convention") ||
		stderr.String() != "verbsgen: warning: "+conv+":1: ibv_brand_nwe matches no function in these headers\n" {
		t.Errorf("misspelt rule: error %v, stderr %q", err, stderr.String())
	}
}

// TestReportMissingConventions: -report on a header set with two
// functions that have no convention prints the whole report, then both
// with their header lines and result types, and exits 1 with a count;
// once a conventions file gives them theirs it exits 0 and lists none.
func TestReportMissingConventions(t *testing.T) {
	headers, lines := vendoredWith(t, myVendorOp, "struct ibv_pd *ibv_my_vendor_alloc_pd(struct ibv_context *ctx, uint64_t flags);")
	stdout, stderr, code := runBinary(t, "-headers", headers, "-report")
	if code != 1 || stderr != "verbsgen: 2 functions have no error convention\n" {
		t.Errorf("exit status %d, stderr %q; want 1 and a count", code, stderr)
	}
	for _, w := range []string{"verbsgen report, rdma-core 65.0\n", "\ninfiniband/verbs.h: ", "\ntotal: ", "\nerror conventions:\n",
		"\n  ibv_create_qp (infiniband/verbs.h:", "; without one: 2\n"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("the report lacks %q", w)
		}
	}
	tail := "functions without an error convention: 2 (give each one a line in a conventions file, verbsgen -conventions FILE)\n" +
		fmt.Sprintf(`  ibv_my_vendor_op (infiniband/verbs.h:%d): returns int; a line "ibv_my_vendor_op CONVENTION", `+
			`CONVENTION one of errno-result, minus-one-errno, count-or-error, getaddrinfo, cannot-fail `+
			`(those a result of type int fits: its documentation says which)`+"\n", lines[0]) +
		fmt.Sprintf(`  ibv_my_vendor_alloc_pd (infiniband/verbs.h:%d): returns struct ibv_pd *; a line "ibv_my_vendor_alloc_pd CONVENTION", `+
			`CONVENTION one of null-errno, cannot-fail (those a result of type struct ibv_pd * fits: its documentation says which)`+"\n", lines[1])
	if !strings.HasSuffix(stdout, tail) {
		i := strings.LastIndex(stdout, "\nconventions: ")
		t.Errorf("the report does not end with the functions without a convention:\n%s\nwant it to end with:\n%s", stdout[max(i, 0):], tail)
	}

	conv := writeConventions(t, "ibv_my_vendor_op errno-result\n")
	stdout, stderr, code = runBinary(t, "-headers", headers, "-report", "-conventions", conv)
	if code != 1 || stderr != "verbsgen: 1 function has no error convention\n" {
		t.Errorf("one missing: exit status %d, stderr %q; want 1 and a count", code, stderr)
	}
	if w := fmt.Sprintf(`  ibv_my_vendor_op (infiniband/verbs.h:%d): errno returned, rule "vendor.conventions: ibv_my_vendor_op"`+"\n", lines[0]); !strings.Contains(stdout, w) {
		t.Errorf("one missing: the report lacks %q", w)
	}
	if !strings.Contains(stdout, "functions without an error convention: 1 (") || strings.Contains(stdout, "\n  ibv_my_vendor_op (infiniband/verbs.h:"+fmt.Sprint(lines[0])+"): returns") {
		t.Errorf("one missing: the report does not list ibv_my_vendor_alloc_pd alone as without a convention")
	}
	conv = writeConventions(t, "ibv_my_vendor_op errno-result\nibv_my_vendor_alloc_pd null-errno\n")
	stdout, stderr, code = runBinary(t, "-headers", headers, "-report", "-conventions", conv)
	if code != 0 || stderr != "" || strings.Contains(stdout, "functions without an error convention") || !strings.Contains(stdout, "; without one: 0\n") {
		t.Errorf("none missing: exit status %d, stderr %q", code, stderr)
	}
}

// vendoredEdited copies headers/vendored/include, the headers goverbs'
// committed packages were generated from, to a temporary directory, applies
// edits (old -> new, each matching exactly once) to its infiniband/verbs.h,
// and returns the copy.
func vendoredEdited(t *testing.T, edits ...string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "include")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "headers", "vendored", "include"))); err != nil {
		t.Fatal(err)
	}
	verbs := filepath.Join(dst, "infiniband", "verbs.h")
	b, err := os.ReadFile(verbs)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i+1 < len(edits); i += 2 {
		if n := strings.Count(text, edits[i]); n != 1 {
			t.Fatalf("edit %q matches %d times in verbs.h, want once", edits[i], n)
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	if err := os.WriteFile(verbs, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestVerifyVerdict runs verbsgen verify on goverbs' committed packages
// against edited copies of the vendored headers and checks what a CI acts
// on: the class of each line, the verdict line and the exit status, with
// and without -allow-growth.
func TestVerifyVerdict(t *testing.T) {
	generated := filepath.Join("..", "..", "generated")
	additions := vendoredEdited(t,
		"\tIBV_ACCESS_RELAXED_ORDERING\t= IBV_ACCESS_OPTIONAL_FIRST,\n",
		"\tIBV_ACCESS_RELAXED_ORDERING\t= IBV_ACCESS_OPTIONAL_FIRST,\n\tIBV_ACCESS_MY_VENDOR = (1 << 30),\n",
		"\tuint32_t phys_port_cnt_ex;\n", "\tuint32_t phys_port_cnt_ex;\n\tuint64_t my_new;\n",
		"int ibv_query_port_speed(",
		"struct ibv_my_vendor_attr {\n\tuint32_t flags;\n\tuint64_t handle;\n};\n\nint ibv_my_vendor_op(struct ibv_context *ctx, uint32_t flags);\n\nint ibv_query_port_speed(")
	moved := vendoredEdited(t, "\tuint16_t\t\tlid;\n\tuint16_t\t\tsm_lid;\n", "\tuint16_t\t\tsm_lid;\n\tuint16_t\t\tlid;\n")
	inserted := vendoredEdited(t, "\tuint16_t\t\tlid;\n", "\tuint16_t\t\tlid;\n\tuint16_t\t\tmy_mid;\n")
	retyped := vendoredEdited(t, "\tuint32_t\t\tmax_msg_sz;\n", "\tint32_t\t\tmax_msg_sz;\n")
	prototype := vendoredEdited(t,
		"int ibv_query_port_speed(struct ibv_context *context, uint32_t port_num,",
		"int ibv_query_port_speed(struct ibv_context *context, uint64_t port_num,")
	for _, tc := range []struct {
		name     string
		headers  string
		growth   bool // -allow-growth
		code     int
		lines    []string // lines stdout must have
		verdict  string
		stderrRE string
	}{
		{"unchanged", vendoredEdited(t), false, 0, nil, "verify: compatible: 0 additions", `^$`},
		{"additions", additions, false, 1, []string{
			"addition: enum ibv_access_flags enumerator IBV_ACCESS_MY_VENDOR: value: C 1073741824, Go missing",
			"addition: struct ibv_device_attr_ex member my_new: offset: C 400, Go missing",
			"addition: struct ibv_my_vendor_attr: size: C 16, Go missing",
			"addition: function ibv_my_vendor_op: prototype: C int32(pointer, uint32), Go missing",
		}, "verify: compatible: 5 additions", `^verbsgen: the generated packages and these headers differ by growth only \(-allow-growth accepts that\)\n$`},
		{"additions allowed", additions, true, 0, nil, "verify: compatible: 5 additions", `^$`},
		{"members swapped", moved, true, 1, []string{
			"breaking: struct ibv_port_attr member lid: offset: C 36, Go 34",
			"breaking: struct ibv_port_attr member sm_lid: offset: C 34, Go 36",
		}, "verify: incompatible: 2 breaking changes, 0 additions", `^verbsgen: the generated packages are incompatible with these headers\n$`},
		{"member inserted", inserted, true, 1, []string{
			"breaking: struct ibv_port_attr member my_mid: offset: C 36, Go missing",
		}, "", `incompatible`},
		{"member retyped", retyped, true, 1, []string{
			"breaking: struct ibv_port_attr member max_msg_sz: type: C int32, Go uint32",
		}, "verify: incompatible: 1 breaking changes, 0 additions", `incompatible`},
		{"parameter retyped", prototype, true, 1, []string{
			"breaking: function ibv_query_port_speed parameter 2 (port_num): C uint64, Go uint32",
		}, "verify: incompatible: 1 breaking changes, 0 additions", `incompatible`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"verify", "-headers", tc.headers, "-dir", generated}
			if tc.growth {
				args = append(args, "-allow-growth")
			}
			stdout, stderr, code := runBinary(t, args...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, l := range tc.lines {
				if !strings.Contains(stdout, "\n"+l+"\n") && !strings.HasPrefix(stdout, l+"\n") {
					t.Errorf("stdout lacks line %q:\n%s", l, stdout)
				}
			}
			if last := lastLine(stdout); tc.verdict != "" && last != tc.verdict {
				t.Errorf("verdict %q, want %q", last, tc.verdict)
			}
			if !regexp.MustCompile(tc.stderrRE).MatchString(stderr) {
				t.Errorf("stderr %q does not match %s", stderr, tc.stderrRE)
			}
		})
	}
}

// TestVerifyOlderRelease: goverbs' packages (rdma-core 65.0) verified
// against the pinned 56.1 headers have only grown since, so verify calls
// them compatible, and -allow-growth makes that exit 0.
func TestVerifyOlderRelease(t *testing.T) {
	headers := filepath.Join("..", "..", "headers", "rdma-core-56.1")
	if _, err := os.Stat(filepath.Join(headers, "infiniband", "verbs.h")); err != nil {
		msg := "pinned headers " + headers + " are missing: run `make headers` (or `bash headers/fetch.sh`) first"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set, so this is a failure, not a skip)")
		}
		t.Skip(msg)
	}
	stdout, stderr, code := runBinary(t, "verify", "-headers", headers, "-dir", filepath.Join("..", "..", "generated"), "-allow-growth")
	if code != 0 || strings.Contains(stdout, "breaking: ") {
		t.Errorf("exit status %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	if last := lastLine(stdout); !regexp.MustCompile(`^verify: compatible: [1-9][0-9]* additions$`).MatchString(last) {
		t.Errorf("verdict %q, want compatible with additions", last)
	}
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestSince: verbsgen since dates each function of the pinned trees by the
// oldest that declares it, and generating with that table names the release
// in a missing function's error only if a pinned tree declares the
// function: one in the headers generated from but in no tree (a vendor's
// addition) is said to be in none, whatever the headers' own version.
func TestSince(t *testing.T) {
	trees := t.TempDir()
	old := headerSetAt(t, filepath.Join(trees, "rdma-core-1.0"), nil)
	newer := headerSetAt(t, filepath.Join(trees, "rdma-core-2.0"), map[string]string{
		"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "int ibv_destroy_newer(struct ibv_thing *t);\n",
	})
	table := filepath.Join(t.TempDir(), "since.tsv")
	var stderr bytes.Buffer
	if err := run([]string{"since", "-o", table, newer, old}, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("since: %v\n%s", err, stderr.String())
	}
	got, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	want := "# The oldest of the rdma-core releases 1.0, 2.0 whose headers declare each extern\n" +
		"# function: function<TAB>release, sorted by function. A function missing\n" +
		"# here is declared by none of them. Made by (do not edit):\n" +
		"#   verbsgen since -o FILE " + newer + " " + old + "\n" +
		"ibv_destroy_newer\t2.0\n" +
		"ibv_destroy_thing\t1.0\n"
	if string(got) != want {
		t.Fatalf("since wrote\n%s\nwant\n%s", got, want)
	}

	// Headers "2.0 plus additions": ibv_destroy_vendor is in no pinned tree.
	headers := headerSet(t, map[string]string{
		"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "int ibv_destroy_newer(struct ibv_thing *t);\nint ibv_destroy_vendor(struct ibv_thing *t);\n",
	})
	_, out, _ := fakeOutput(t)
	if err := run([]string{"-headers", headers, "-version", "2.0", "-since-table", table, "-out", out}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("generating with -since-table: %v", err)
	}
	funcs, err := os.ReadFile(filepath.Join(out, "verbs", "zverbs_funcs.go"))
	if err != nil {
		t.Fatal(err)
	}
	since := regexp.MustCompile(`Since:\s+map\[string\]string\{([^}]*)\}`).FindSubmatch(funcs)
	if since == nil {
		t.Fatalf("zverbs_funcs.go has no Since table:\n%s", funcs)
	}
	if got := strings.Join(strings.Fields(string(since[1])), " "); got != `"ibv_destroy_newer": "2.0", "ibv_destroy_thing": "1.0",` {
		t.Errorf("Since holds %s, want ibv_destroy_thing at 1.0, ibv_destroy_newer at 2.0 and no ibv_destroy_vendor", got)
	}

	// The table built in: only what the pinned releases declare.
	pinnedHeaders := headerSet(t, map[string]string{
		"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "struct ibv_qp;\nint ibv_destroy_qp(struct ibv_qp *qp);\n",
	})
	_, out, _ = fakeOutput(t)
	if err := run([]string{"-headers", pinnedHeaders, "-version", "65.0", "-since-pinned", "-out", out}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("generating with -since-pinned: %v", err)
	}
	if funcs, err = os.ReadFile(filepath.Join(out, "verbs", "zverbs_funcs.go")); err != nil {
		t.Fatal(err)
	}
	since = regexp.MustCompile(`Since:\s+map\[string\]string\{([^}]*)\}`).FindSubmatch(funcs)
	if since == nil {
		t.Fatalf("generated with -since-pinned, zverbs_funcs.go has no Since table:\n%s", funcs)
	}
	if got := strings.TrimSuffix(strings.Join(strings.Fields(string(since[1])), " "), ","); got != `"ibv_destroy_qp": "33.2"` {
		t.Errorf("with -since-pinned, Since holds %s, want ibv_destroy_qp at 33.2 and not ibv_destroy_thing, which no pinned release declares", got)
	}

	// Without the table nothing is dated: no Since at all.
	_, out, _ = fakeOutput(t)
	if err := run([]string{"-headers", headers, "-version", "2.0", "-out", out}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("generating without -since-table: %v", err)
	}
	if funcs, err = os.ReadFile(filepath.Join(out, "verbs", "zverbs_funcs.go")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(funcs), "Since:") {
		t.Errorf("generated without -since-table, zverbs_funcs.go dates functions anyway")
	}
}

// TestSinceMistakes: verbsgen since without -o, without trees, or with a
// tree whose name carries no version fails naming the mistake and writes
// nothing.
func TestSinceMistakes(t *testing.T) {
	tree := headerSetAt(t, filepath.Join(t.TempDir(), "rdma-core-1.0"), nil)
	plain := headerSet(t, nil)
	table := filepath.Join(t.TempDir(), "since.tsv")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"since", tree}, "since: -o is required"},
		{[]string{"since", "-o", table}, "since: no release trees given (.../rdma-core-VERSION)"},
		{[]string{"since", "-o", table, plain}, "since: " + plain + ": no rdma-core version in the name (want .../rdma-core-VERSION)"},
	} {
		err := run(tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(table); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: %s written", tc.args, table)
		}
	}
}
