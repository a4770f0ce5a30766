// Package versions checks the generator and the committed packages against
// the other pinned rdma-core releases: layouts generated from the 56.1
// headers are compared with gcc compiling those same headers; the committed
// (vendored 65.0) bindings refuse to build against 44.0's headers and
// verify names every difference; and every older release's structs keep
// their members where the vendored release has them (growth_test.go).
package versions

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
	"github.com/goverbs/goverbs/tests/internal/scratch"
	"github.com/stretchr/testify/require"
)

const (
	repo      = "../.."
	headers44 = repo + "/headers/rdma-core-44.0"
	headers56 = repo + "/headers/rdma-core-56.1"
)

// tempModule makes an empty module that requires this repository through a
// replace directive, as a downstream user's module would.
func tempModule(t *testing.T, module string) string {
	t.Helper()
	root, err := filepath.Abs(repo)
	require.NoError(t, err)
	return scratch.Module(t, root, module, "")
}

// TestLayout56 generates layout-only packages from the 56.1 headers into a
// temporary module and runs their generated layout test there, compiled
// against the 56.1 headers (nothing is linked: the layout-only packages have
// no cgo stubs).
func TestLayout56(t *testing.T) {
	scratch.RequireTrees(t, headers56)
	inc, err := filepath.Abs(headers56)
	require.NoError(t, err)
	const module = "example.com/goverbs56"
	tmp := tempModule(t, module)
	res, err := gen.Run(gen.Config{
		Headers:    inc,
		Out:        filepath.Join(tmp, "generated"),
		ImportRoot: module + "/generated",
		LayoutDir:  filepath.Join(tmp, "tests", "layout"),
		LayoutPkg:  module + "/tests/layout",
		LayoutOnly: true,
		Version:    "56.1",
		Command:    "verbsgen -headers headers/rdma-core-56.1 -layout-only (tests/versions)",
	})
	require.NoError(t, err)
	require.Equal(t, "56.1", res.IR.Version)

	// The oracle sees the 56.1 headers first; the system's 44.0 copies come after.
	out, err := scratch.Go(tmp, []string{"CGO_CFLAGS=-I" + inc}, "test", "-count=1", "-v", "./tests/layout/")
	t.Logf("go test (56.1 layouts against gcc with the 56.1 headers):\n%s", out)
	require.NoError(t, err, "the 56.1 layout test failed")
	require.Contains(t, out, "layout rdma-core 56.1: compared")
	require.Contains(t, out, "; 0 differ")
}

// TestVersionDiff reports what changed between 44.0 and 56.1, and checks the
// comparison sees the layout change rdma-core made to struct ibv_port_attr.
func TestVersionDiff(t *testing.T) {
	scratch.RequireTrees(t, headers44, headers56)
	build := func(dir string) *gen.IR {
		res, err := gen.Build(gen.Config{Headers: dir, ImportRoot: "x/generated", LayoutOnly: true})
		require.NoError(t, err)
		return res.IR
	}
	old, cur := build(headers44), build(headers56)
	changes := gen.Diff(old, cur)
	var lines []string
	structs := map[string]bool{}
	for _, c := range changes {
		lines = append(lines, c.String())
		if c.Kind == "struct" {
			structs[c.Name] = true
		}
	}
	t.Logf("rdma-core 44.0 -> 56.1: %d changes, %d structs touched:\n%s", len(changes), len(structs), strings.Join(lines, "\n"))
	require.True(t, structs["struct ibv_port_attr"], "ibv_port_attr gained members in 56.1 and the diff must show it")
	require.Empty(t, gen.Diff(old, old), "an IR compared with itself has no changes")
}

// TestMismatchedBuildFails compiles the committed bindings (generated from
// the vendored 65.0) against the 44.0 headers instead: the layout
// assertions in their cgo preamble must stop the build and name what
// changed and how to fix it. This is what a user who regenerates from
// other headers relies on. No compiler flag can swap the headers of the
// committed package (the preamble includes them by a path of its own), so
// the test copies the package into a scratch module whose
// headers/vendored/include is the 44.0 tree.
func TestMismatchedBuildFails(t *testing.T) {
	scratch.RequireTrees(t, headers44)
	inc, err := filepath.Abs(headers44)
	require.NoError(t, err)
	src, err := os.ReadFile(repo + "/generated/verbs/zverbs_funcs.go")
	require.NoError(t, err)
	n := strings.Count(string(src), "\nGOVERBS_LAYOUT(")
	t.Logf("generated/verbs carries %d layout assertions", n)
	require.Greater(t, n, 1000)

	root, err := filepath.Abs(repo)
	require.NoError(t, err)
	mod := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(mod, "generated/verbs"), os.DirFS(root+"/generated/verbs")))
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "headers/vendored"), 0o755))
	require.NoError(t, os.Symlink(inc, filepath.Join(mod, "headers/vendored/include")))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/mismatch\n\ngo 1.25.0\n\n"+
		"require github.com/goverbs/goverbs v0.0.0\n\nreplace github.com/goverbs/goverbs => "+root+"\n"), 0o644))
	cmd := exec.Command("go", "build", "./generated/verbs")
	cmd.Dir = mod
	// 44.0's own headers include each other by <...>: from the 44.0 tree.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-I"+inc)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "building 65.0 bindings against 44.0 headers must fail")
	var failed []string
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "static assertion failed: "); i >= 0 {
			failed = append(failed, line[i:])
		}
	}
	t.Logf("the build stops with:\n%s", strings.Join(failed, "\n"))
	require.Contains(t, string(out), `goverbs: sizeof(struct ibv_port_attr) differs from rdma-core 65.0, which package verbs was generated from: regenerate it for these headers (go generate, or verbsgen -headers /usr/include)`)
	require.Contains(t, string(out), `goverbs: sizeof(struct verbs_context) differs from rdma-core 65.0`)
}

// TestVerify runs `verbsgen verify` the way a downstream user's CI does:
// from another module, against a header set. The committed bindings match
// the vendored 65.0 exactly and differ from 44.0 in precisely what rdma-core
// changed, all of it growth: members it added at records' ends, functions
// it added, verbs_context, which grows at its front (its members keep their
// offsets relative to its anchor, so none is reported moved), and a
// reserved array that 65.0's new members shortened without moving anything
// (only the member types show it). 44.0's 706 constants all keep their
// values and types in 65.0. So verify calls 44.0 compatible: it exits 1,
// and 0 with -allow-growth.
func TestVerify(t *testing.T) {
	scratch.RequireTrees(t, headers44)
	user := tempModule(t, "example.com/user")
	verify := func(headers string, flags ...string) (string, error) {
		abs, err := filepath.Abs(headers)
		require.NoError(t, err)
		return scratch.Go(user, nil, append([]string{"run", "github.com/goverbs/goverbs/cmd/verbsgen", "verify", "-headers", abs}, flags...)...)
	}
	out, err := verify(repo + "/headers/vendored/include")
	t.Logf("verify against the vendored 65.0:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, out, ": 0 differences")

	out, err = verify(headers44)
	t.Logf("verify against 44.0:\n%s", out)
	require.Error(t, err, "verify must exit non-zero on a difference without -allow-growth")
	for _, want := range []string{
		"addition: struct ibv_port_attr: size: C 52, Go 56",
		"addition: struct ibv_qp_ex: size: C 352, Go 360",
		"addition: struct verbs_context: size: C 648, Go 696",
		"addition: struct ib_uverbs_query_port_resp_ex member reserved: type: C [6]uint8, Go [2]uint8",
		"addition: function ibv_reg_mr_ex: prototype: C missing, Go pointer(pointer, pointer)",
		"101 enums, 706 constants and 221 functions",
		": 39 differences (0 breaking, 39 additions)",
		"verify: compatible: 39 additions",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "member query_port", "verbs_context is compared relative to its anchor")
	out, err = verify(headers44, "-allow-growth")
	require.NoError(t, err, "growth only, allowed:\n%s", out)

	// arm64's layouts, from this host, as a user's CI building for both
	// would check them: the same differences, in arm64's sizes (its glibc
	// mutex is 8 bytes longer, and ibv_qp_ex holds one).
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		scratch.Missing(t, "aarch64-linux-gnu-gcc (for verify -targets linux/arm64)", "make deps")
	}
	out, err = verify(repo+"/headers/vendored/include", "-targets", "linux/amd64,linux/arm64")
	t.Logf("verify both architectures against the vendored 65.0:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, out, "verify: linux/amd64: 281 structs and unions")
	require.Contains(t, out, "verify: linux/arm64: 281 structs and unions")
	require.Equal(t, 2, strings.Count(out, ": 0 differences"))
	out, err = verify(headers44, "-targets", "linux/arm64")
	t.Logf("verify arm64 against 44.0:\n%s", out)
	require.Error(t, err, "verify must exit non-zero on a difference without -allow-growth")
	require.Contains(t, out, "addition: linux/arm64: struct ibv_qp_ex: size: C 360, Go 368")
	require.Contains(t, out, "verify: linux/arm64: 271 structs and unions")
	require.Contains(t, out, ": 39 differences (0 breaking, 39 additions)")
}

// TestVerifyOwnPackages runs `verbsgen verify` on packages a user generated
// into their own module, as docs/own-headers.md has them
// do, with only -import to say where: their generated/ holds the package
// directories and no Go file of its own, which verify once failed to find
// ("finding example.com/user/generated (give -dir): exit status 1").
func TestVerifyOwnPackages(t *testing.T) {
	inc, err := filepath.Abs(repo + "/headers/vendored/include")
	require.NoError(t, err)
	user := tempModule(t, "example.com/user")
	out, err := scratch.Go(user, nil, "run", "github.com/goverbs/goverbs/cmd/verbsgen", "-headers", inc,
		"-layout-only", "-out", "generated", "-import", "example.com/user/generated")
	require.NoError(t, err, "generate: %s", out)
	out, err = scratch.Go(user, nil, "run", "github.com/goverbs/goverbs/cmd/verbsgen", "verify",
		"-headers", inc, "-import", "example.com/user/generated")
	t.Logf("verify: %s", out)
	require.NoError(t, err)
	require.Contains(t, out, filepath.Join(user, "generated")+" checked against")
	require.Contains(t, out, ": 0 differences")
}

// TestLayoutFromUserModule runs the layout check docs/design.md tells users to keep
// in their CI, `go test github.com/goverbs/goverbs/tests/layout`, from a
// module whose go.sum has none of this repository's dependencies (a user's
// has only what the goverbs packages they import need) and which the go
// command may not update: it failed with "missing go.sum entry for module
// providing package github.com/stretchr/testify/require" while the
// package's tests imported testify.
func TestLayoutFromUserModule(t *testing.T) {
	user := tempModule(t, "example.com/user")
	require.NoError(t, os.WriteFile(filepath.Join(user, "go.sum"), nil, 0o644))
	cmd := exec.Command("go", "test", "-count=1", "github.com/goverbs/goverbs/tests/layout")
	cmd.Dir = user
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test github.com/goverbs/goverbs/tests/layout from a user's module:\n%s", out)
}

// TestRegenerate56 follows the downstream workflow for a newer rdma-core:
// generate a full package set (stubs included) from the 56.1 headers into
// the user's module and build it against those headers: the layout
// assertions pass. Run against this machine's 44.0 library, the program
// starts: nothing is bound at load time (a function 56.1 added fails only
// its own call, see gen's TestLoader).
func TestRegenerate56(t *testing.T) {
	scratch.RequireTrees(t, headers56)
	inc, err := filepath.Abs(headers56)
	require.NoError(t, err)
	user := tempModule(t, "example.com/user")
	out, err := scratch.Go(user, nil, "run", "github.com/goverbs/goverbs/cmd/verbsgen", "-headers", inc,
		"-out", "generated", "-import", "example.com/user/generated",
		"-layout", "tests/layout", "-layout-import", "example.com/user/tests/layout")
	t.Logf("generate from 56.1: %s", out)
	require.NoError(t, err)

	cflags := []string{"CGO_CFLAGS=-I" + inc}
	out, err = scratch.Go(user, cflags, "vet", "./...")
	require.NoError(t, err, "the 56.1 package set must build against the 56.1 headers:\n%s", out)
	src, err := os.ReadFile(filepath.Join(user, "generated", "verbs", "zverbs_funcs.go"))
	require.NoError(t, err)
	require.Contains(t, string(src), "from rdma-core 56.1. DO NOT EDIT.")

	out, err = scratch.Go(user, cflags, "test", "-count=1", "./tests/layout/")
	t.Logf("running it against the installed library:\n%s", out)
	require.NoError(t, err, "the 56.1 package set must start and pass its layout test on a machine with 44.0")
	require.Contains(t, out, "ok ")
}
