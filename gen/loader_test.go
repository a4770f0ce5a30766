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

// TestLoader generates the loader case (testdata/loader) against a fake
// library that gcc builds here, in a temporary module, and runs the tests
// of testdata/loader/loader_test.go.txt there: functions the library has are
// reached through their trampolines (from stubs, static inlines and a
// macro's expansion); those it lacks return their convention's failure value
// (an inline's, the error naming the extern its body calls)
// and are reported by Available with the release that first declares them;
// a package whose library is not installed reports a *libload.LibraryError
// naming it and the package that provides it, and nothing crashes; a
// function's failure reads as its convention says (a returned -errno over
// a stale errno, -1 with errno, a provider's negative code, a -1 that
// means there is nothing to give).
func TestLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not compiling the loader case")
	}
	goCmd := goTool(t)
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc on PATH to build the fake library")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "loader"))
	if err != nil {
		t.Fatal(err)
	}
	libdir := t.TempDir()
	lib := filepath.Join(libdir, "libfake.so.1")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, filepath.Join(dir, "libfake.c")).CombinedOutput(); err != nil {
		t.Fatalf("building the fake library: %v\n%s", err, out)
	}

	const module = "example.com/loadercase"
	mod := t.TempDir()
	specs := []gen.PackageSpec{
		{
			Name: "verbs", Headers: []string{"infiniband/verbs.h"}, Includes: []string{"infiniband/verbs.h"},
			Prefixes: []gen.Prefix{{C: "ibv_", Go: ""}},
			Library:  gen.Library{Soname: lib, Package: "libfake1"},
		},
		{
			Name: "rdmacm", Headers: []string{"rdma/rdma_cma.h"}, Includes: []string{"rdma/rdma_cma.h"},
			Prefixes: []gen.Prefix{{C: "rdma_", Go: ""}},
			Library:  gen.Library{Soname: "libgoverbs-absent.so.1", Package: "libabsent1"},
		},
	}
	// The pinned releases are 0.1 (testdata/loader/old) and 0.2 (the
	// headers generated from), but for ibv_missing_u16, which stands for a
	// vendor's addition: declared by the headers, by no pinned release.
	since, err := gen.PinnedSince([]gen.Release{
		{Version: "0.2", Headers: filepath.Join(dir, "include")},
		{Version: "0.1", Headers: filepath.Join(dir, "old", "rdma-core-0.1")},
	}, []string{"infiniband/verbs.h", "rdma/rdma_cma.h"})
	if err != nil {
		t.Fatalf("PinnedSince: %v", err)
	}
	delete(since, "ibv_missing_u16")
	res, err := gen.Run(gen.Config{
		Headers:    filepath.Join(dir, "include"),
		Out:        filepath.Join(mod, "generated"),
		ImportRoot: module + "/generated",
		Version:    "0.2",
		Command:    "verbsgen (gen loader test)",
		Packages:   specs,
		Roots:      []string{"infiniband/verbs.h", "rdma/rdma_cma.h"},
		Since:      since,
		Conventions: []gen.ConventionRule{
			{Name: "values", Convention: gen.CannotFail,
				Funcs: []string{"ibv_add_one", "ibv_add_two", "ibv_add_three", "ibv_twice", "ibv_missing_void", "ibv_missing_u16",
					"ibv_missing_u16_inline", "ibv_two_newer", "rdma_absent_value"}},
			{Name: "constructors", Convention: gen.NullErrno, Funcs: []string{"ibv_get_thing", "ibv_missing_ptr", "ibv_missing_ptr_inline", "rdma_absent_ptr"}},
			{Name: "errno results", Convention: gen.ErrnoResult, Funcs: []string{"ibv_missing_errno", "ibv_post_shadowed"}},
			{Name: "minus one", Convention: gen.MinusOneErrno, Funcs: []string{"ibv_missing_minus_one", "ibv_minus_one", "rdma_absent_int", "rdma_shadowed"}},
			{Name: "counts", Convention: gen.CountOrError, Funcs: []string{"ibv_count_negated"}},
			{Name: "poll codes", Convention: gen.CountOrError, NegativeCode: true, Funcs: []string{"ibv_poll_like"}},
			{Name: "start_poll codes", Convention: gen.ErrnoResult, NegativeCode: true, Funcs: []string{"ibv_start_poll_like"}},
			{Name: "codes and errno", Convention: gen.MinusOneErrno, NegativeCode: true,
				Funcs: []string{"ibv_rereg_like", "ibv_missing_rereg_like"}},
			{Name: "index or none", Convention: gen.CountOrError, Unsupported: "there is no index",
				Funcs: []string{"ibv_index_like", "ibv_missing_index_like"}},
		},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var loaders []string
	for _, f := range res.Files {
		// A cannot-fail inline behind a dated and an undated extern says
		// which pinned releases lack the one and that none declares the
		// other.
		if f.Path == "verbs/zverbs_funcs.go" {
			const want = "It cannot fail once called, but rdma-core releases before 0.2 lack ibv_add_one, " +
				"and no rdma-core release goverbs pins declares ibv_missing_u16: when the loaded library lacks one, " +
				"it calls nothing and returns a *verberr.Error naming ibv_two_newer"
			if !strings.Contains(strings.ReplaceAll(string(f.Data), "\n// ", " "), want) {
				t.Errorf("%s: TwoNewer's doc does not say %q", f.Path, want)
			}
		}
		if strings.HasSuffix(f.Path, "_load.c") {
			loaders = append(loaders, f.Path)
		}
	}
	if strings.Join(loaders, " ") != "verbs/zverbs_load.c rdmacm/zrdmacm_load.c" {
		t.Fatalf("loader files %v, want one per package", loaders)
	}

	root := repoRoot(t)
	gomod := fmt.Sprintf("module %s\n\ngo 1.25\n\nrequire github.com/goverbs/goverbs v0.0.0\n\nreplace github.com/goverbs/goverbs => %s\n", module, root)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(dir, "loader_test.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "generated", "verbs", "loader_test.go"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goCmd, "test", "-count=1", "-v", "./generated/verbs/")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local",
		"CGO_ENABLED=1", "CGO_CFLAGS=-g -O2 -I"+filepath.Join(dir, "include"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the temporary module: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestLoaded", "--- PASS: TestMissingFunctions", "--- PASS: TestNoLibrary",
		"--- PASS: TestErrnoOrder", "--- PASS: TestProviderCodes", "--- PASS: TestUnsupported"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the loader case did not report %q:\n%s", want, out)
		}
	}
}
