package gen_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

var update = flag.Bool("update", false, "rewrite gen/testdata/*/want from the generator's current output")

// The golden cases: each is an include directory gen/testdata/NAME/include
// holding one hand-written infiniband/verbs.h, and the expected output in
// gen/testdata/NAME/want. Refresh with: go test ./gen -run Golden -update
//
//   - records: named unions, unions of structs, anonymous unions with and
//     without a member that fills them, anonymous struct members, nested
//     anonymous records, flexible array members, glibc members (pthread,
//     sockaddr, timespec), incomplete types, function pointers.
//   - consts: signed, unsigned, 64-bit and anonymous enums; integer macros
//     ((1ULL << 34), negative, expressions, ((void *)-1)); a non-integer
//     macro (skipped); macros aliasing a struct and an enum tag; 2_5 vs 25.
//   - funcs: extern prototypes (a variadic one skipped, records by value),
//     static inline functions, function-like macros expanding to a call
//     (ibv_reg_mr, ibv_query_port) and ones with no Go signature (skipped),
//     pointers to arrays as parameters and results (directly and through a
//     macro), a function pointer and a pointer to one through a macro,
//     parameters named as Go's predeclared types and constants; access
//     parameters given enum ibv_access_flags' Go type (Retypes, stale in
//     the other cases); const
//     pointers (const char *const *, const char **, const struct, const
//     function pointers, unnamed parameters) as parameters and results of
//     macros and of inlines whose errno the preamble makes positive, whose
//     C wrappers strictCFlags compile; pointers passed unchecked (every
//     pointer of a data-path function: an array, a const record, a pointer
//     to an array, void *, an out-slot; a handle slot elsewhere, in a
//     prototype that names no parameter), cast back by their wrappers.
var goldenCases = []string{"records", "consts", "funcs"}

// goldenModule is the module path the golden output is generated for: the
// compile step writes it into a temporary module of that name.
const goldenModule = "example.com/golden"

func goldenSpecs() []gen.PackageSpec {
	return []gen.PackageSpec{{
		Name:     "verbs",
		Headers:  []string{"infiniband/verbs.h"},
		Includes: []string{"infiniband/verbs.h"},
		Prefixes: []gen.Prefix{
			{C: "ibv_", Go: ""}, {C: "IBV_", Go: ""},
			{C: "ib_uverbs_", Go: "Uverbs"}, {C: "IB_UVERBS_", Go: "Uverbs"},
		},
		DataPath: []string{"ibv_post_"},
		// funcs' access parameters, through an extern, a static inline
		// and a macro; in the other cases these entries are stale.
		Retypes: map[string]gen.Retype{
			"ibv_reg_mr.access":       {Enum: "ibv_access_flags", Reason: "golden: an int parameter of a macro and an extern"},
			"__ibv_reg_mr.access":     {Enum: "ibv_access_flags", Reason: "golden: an unsigned parameter of a static inline"},
			"ibv_reg_mr_iova2.access": {Enum: "ibv_access_flags", Reason: "golden: an unsigned parameter of an extern"},
		},
	}}
}

func goldenConfig(name string) gen.Config {
	return gen.Config{
		Headers:    filepath.Join("testdata", name, "include"),
		ImportRoot: goldenModule + "/generated",
		LayoutPkg:  goldenModule + "/layout",
		Version:    "0.0-golden",
		Command:    "verbsgen (gen golden test, case " + name + ")",
		Packages:   goldenSpecs(),
		Roots:      []string{"infiniband/verbs.h"},
		Conventions: []gen.ConventionRule{
			{Name: "golden values", Convention: gen.CannotFail,
				Funcs: []string{"ibv_ack_events", "ibv_make_sge", "ibv_node_name", "ibv_qp_num", "ibv_sge_bytes",
					"ibv_row", "ibv_row_sum", "ibv_grid_row", "ibv_qp_num_reader", "__ibv_apply", "ibv_apply", "ibv_mask",
					"rdma_seterrno", "ibv_post_rows", "ibv_names*", "ibv_attr*", "ibv_reader*", "ibv_label*", "ibv_cell", "ibv_grid_cell"}},
			{Name: "golden constructors", Convention: gen.NullErrno, Funcs: []string{"ibv_reg_mr*", "__ibv_reg_mr"}},
			{Name: "golden errno copiers", Convention: gen.NullErrno, Funcs: []string{"ibv_find_*"}},
			{Name: "golden counts", Convention: gen.CountOrError, Funcs: []string{"ibv_count_names", "ibv_count"}},
			{Name: "golden errno results", Convention: gen.ErrnoResult,
				Funcs: []string{"ibv_post_recv", "ibv_query_port", "___ibv_query_port", "ibv_open_qp"}},
		},
	}
}

// goldenOutputs maps golden file names (want/NAME.golden) to their content:
// every emitted file under its base name, and the -report text.
func goldenOutputs(t *testing.T, res *gen.Result) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range res.Files {
		name := filepath.Base(f.Path) + ".golden"
		if _, dup := out[name]; dup {
			t.Fatalf("two emitted files share the base name %s", filepath.Base(f.Path))
		}
		out[name] = f.Data
	}
	var rep bytes.Buffer
	gen.Report(&rep, res.IR)
	out["report.txt.golden"] = rep.Bytes()
	return out
}

func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := goldenConfig(name)
			res, err := gen.Build(cfg)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			got := goldenOutputs(t, res)
			wantDir := filepath.Join("testdata", name, "want")
			if *update {
				writeGolden(t, wantDir, got)
			} else {
				compareGolden(t, wantDir, got)
			}
			for _, f := range res.Files {
				if !strings.HasSuffix(f.Path, ".go") {
					continue
				}
				af, err := parser.ParseFile(token.NewFileSet(), f.Path, f.Data, parser.ParseComments)
				if err != nil {
					t.Errorf("%s does not parse: %v", f.Path, err)
				} else if !ast.IsGenerated(af) {
					t.Errorf("%s is not recognised as generated code (go/ast.IsGenerated)", f.Path)
				}
				if !bytes.HasPrefix(f.Data, []byte("// "+cfg.Command+"\n// Code generated by the command above from rdma-core 0.0-golden. DO NOT EDIT.\n")) {
					t.Errorf("%s does not start with the command and the DO NOT EDIT line:\n%s", f.Path, firstLines(f.Data, 3))
				}
			}

			// The layout-only variant is the same types file, without stubs.
			lo := cfg
			lo.LayoutOnly, lo.LayoutPkg = true, ""
			lres, err := gen.Build(lo)
			if err != nil {
				t.Fatalf("Build (layout only): %v", err)
			}
			if len(lres.Files) != 1 || lres.Files[0].Path != "verbs/zverbs_types.go" {
				t.Fatalf("layout-only build emitted %v, want just verbs/zverbs_types.go", paths(lres.Files))
			}
			if !bytes.Equal(lres.Files[0].Data, got["zverbs_types.go.golden"]) {
				t.Errorf("layout-only zverbs_types.go differs from the full build's")
			}

			if testing.Short() {
				t.Log("-short: not compiling the generated code")
				return
			}
			compileGolden(t, name, res.Files, lres.Files)
		})
	}
}

func writeGolden(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
	for _, p := range old {
		if _, ok := files[filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func compareGolden(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	old, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
	if len(old) == 0 {
		t.Fatalf("no golden files in %s: run go test ./gen -run Golden -update", dir)
	}
	for _, p := range old {
		if _, ok := files[filepath.Base(p)]; !ok {
			t.Errorf("%s: the generator no longer emits this file (go test ./gen -run Golden -update removes it)", p)
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		want, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%v (run go test ./gen -run Golden -update)", err)
			continue
		}
		if d := lineDiff(want, files[name]); d != "" {
			t.Errorf("%s differs from the generator's output (if intended: go test ./gen -run Golden -update):\n%s", p, d)
		}
	}
}

// lineDiff describes the first difference between two texts, "" if none.
func lineDiff(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	wl := strings.Split(string(want), "\n")
	gl := strings.Split(string(got), "\n")
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	at := func(l []string, i int) string {
		if i < len(l) {
			return fmt.Sprintf("%q", l[i])
		}
		return "(end of file)"
	}
	return fmt.Sprintf("first difference at line %d (want %d lines, got %d):\n  want: %s\n  got:  %s",
		i+1, len(wl), len(gl), at(wl, i), at(gl, i))
}

func firstLines(b []byte, n int) string {
	l := strings.SplitN(string(b), "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

func paths(fs []gen.File) []string {
	var p []string
	for _, f := range fs {
		p = append(p, f.Path)
	}
	return p
}

// strictCFlags make errors of what gcc 14 and later reject by default
// (incompatible pointer types, integer-pointer conversions, implicit
// declarations) and of what they still only warn about (a const or an
// array's const discarded), so that the host's older gcc fails the golden
// build where a user's newer one would: a preamble wrapper that spells
// char ** for a const char *const * parameter warns under gcc 12 and does
// not compile under gcc 14. Each flag is one gcc 12 knows.
const strictCFlags = "-Werror=incompatible-pointer-types -Werror=int-conversion -Werror=implicit-function-declaration " +
	"-Werror=implicit-int -Werror=discarded-qualifiers -Werror=discarded-array-qualifiers"

// compileGolden proves the golden output is valid Go that agrees with gcc:
// in a temporary module (github.com/goverbs/goverbs replaced by this work
// tree) it vets the full output, runs its generated layout test against the
// case's header (the C oracle is compiled with -I the case's include
// directory) and the case's hand-written stub tests, and builds the
// layout-only variant with cgo disabled.
func compileGolden(t *testing.T, name string, full, layoutOnly []gen.File) {
	goCmd := goTool(t)
	root := repoRoot(t)
	include, err := filepath.Abs(filepath.Join("testdata", name, "include"))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	gomod := fmt.Sprintf("module %s\n\ngo 1.25\n\nrequire github.com/goverbs/goverbs v0.0.0\n\nreplace github.com/goverbs/goverbs => %s\n", goldenModule, root)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		if err := os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gen.Write(filepath.Join(mod, "generated"), filepath.Join(mod, "layout"), full); err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Write(filepath.Join(mod, "layoutonly"), "", layoutOnly); err != nil {
		t.Fatal(err)
	}
	// Hand-written companions of a case: C definitions of its extern
	// functions (so the package links) and tests calling the stubs.
	support, _ := filepath.Glob(filepath.Join("testdata", name, "support", "*"))
	for _, p := range support {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, "generated", "verbs", filepath.Base(p)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	env := append(os.Environ(),
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local",
		"CGO_ENABLED=1", "CGO_CFLAGS=-g -O2 "+strictCFlags+" -I"+include,
		// The layout test reads the headers it was generated from here,
		// as a user's test generated without -cgo-include does when its
		// C side compiles against headers given in CGO_CFLAGS.
		"GOVERBS_LAYOUT_HEADERS="+include)
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = mod, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the temporary module: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(env, "vet", "./...")
	out := run(env, "test", "-count=1", "-v", "./...")
	want := []string{"--- PASS: TestHeaders", "--- PASS: TestLayout"}
	if len(support) > 0 {
		want = append(want, "--- PASS: TestStubs")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("go test in the temporary module did not report %q:\n%s", w, out)
		}
	}
	run(append(env, "CGO_ENABLED=0"), "build", "./layoutonly/...")
}
