package main

import (
	"bytes"
	"errors"
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
		// with its file:line until gen.Conventions lists it.
		{name: "function without an error convention", files: map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "int ibv_brand_new(void);\n"},
			want: `^infiniband/verbs\.h:7: ibv_brand_new has no error convention: add it to a rule of gen\.Conventions`},
		{name: "function without an error convention, report", report: true, files: map[string]string{"infiniband/verbs.h": goodRoots["infiniband/verbs.h"] + "int ibv_brand_new(void);\n"},
			want: `infiniband/verbs\.h:7: ibv_brand_new has no error convention`},
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
	if got, want := stdout.String(), "verbsgen: rdma-core 0.0-test: 9 files, 9 changed\n"; got != want {
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
	if got, want := stdout.String(), "verbsgen: rdma-core 0.0-test: 9 files, 0 changed\n"; got != want {
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

// TestBadVersion: a version that -since cannot order (unknown, or not a
// dotted number) and a -version that could not be pasted into the files
// are errors naming the version, before anything is written, not panics.
func TestBadVersion(t *testing.T) {
	old := headerSetAt(t, filepath.Join(t.TempDir(), "rdma-core-1.0"), nil)
	unversioned := headerSet(t, nil)
	for _, tc := range []struct {
		name string
		args []string
		want string // regexp
	}{
		{"unknown current version", []string{"-headers", unversioned, "-since", old},
			`^the version of headers .* is unknown: comparing it with older releases \(-since\) needs a dotted number such as 65\.0 \(give -version\)$`},
		{"current version not a number", []string{"-headers", unversioned, "-version", "1.0-test", "-since", old},
			`^version "1\.0-test" of headers .* is not a dotted number such as 65\.0: it cannot be compared with older releases \(-since\)$`},
		{"older release without a version", []string{"-headers", unversioned, "-version", "2.0", "-since", unversioned},
			`^older release .*: no rdma-core version in the path \(want \.\.\./rdma-core-VERSION\)$`},
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
		{[]string{"-headers", headers, "-layout-only", "-since", headers}, "-since dates stubs, which -layout-only does not emit"},
		{[]string{"-headers", headers, "-layout-import", "example.com/layout"}, "-layout-import needs -layout"},
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
