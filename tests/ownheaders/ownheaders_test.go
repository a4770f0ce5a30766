// Package ownheaders proves, the way a user would do it, that goverbs
// serves a module with its own rdma-core headers: a scratch module outside
// the repository (testdata/site, with a replace directive to this
// checkout) copies goverbs' vendored headers, adds what a vendor's build
// adds (an enumerator, an appended member, a new struct, a function
// libibverbs exports that rdma-core's headers no longer declare, and one
// it does not export), declares their error conventions in its own file,
// runs `go generate` through `go tool verbsgen`, vets, and links its
// package beside hand/ and goverbs' own generated packages. Its CI steps
// run too: verify, and the generated layout test with a warm build cache.
// Bindings generated from the pinned 33.2 and 56.1 trees link beside
// goverbs' own as well.
//
// The program that needs a device (cmd/sitecheck, a test binary) is built
// here and run in the soft-RoCE VM by make rxe-test: set
// GOVERBS_SITE_TEST_OUT to the directory it should be written to (make
// test-go does).
package ownheaders

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/tests/internal/scratch"
	"github.com/stretchr/testify/require"
)

const repo = "../.."

func TestOwnHeaders(t *testing.T) {
	root, err := filepath.Abs(repo)
	require.NoError(t, err)
	for _, v := range []string{"33.2", "56.1"} {
		if _, err := os.Stat(filepath.Join(root, "headers", "rdma-core-"+v, "infiniband", "verbs.h")); err != nil {
			scratch.Missing(t, "pinned headers rdma-core-"+v, "make headers")
		}
	}
	site := scratchModule(t, root)

	// The user's go generate: three header sets, one conventions file.
	out, err := scratch.Go(site, nil, "mod", "tidy")
	require.NoError(t, err, "go mod tidy:\n%s", out)
	out, err = scratch.Go(site, nil, "generate", "./...")
	require.NoError(t, err, "go generate:\n%s", out)
	for _, f := range []string{"rdma/verbs/zverbs_funcs.go", "rdma/rdmacm/zrdmacm_funcs.go", "layout/zlayout_test.go",
		"r33/verbs/zverbs_funcs.go", "r56/verbs/zverbs_funcs.go"} {
		require.FileExists(t, filepath.Join(site, f))
	}
	funcs := readFile(t, filepath.Join(site, "rdma/verbs/zverbs_funcs.go"))
	for _, want := range []string{"func MyVendorOp(", "func GetSysfsPath(", "AccessSiteVendor", "SiteVendorCaps"} {
		if !strings.Contains(funcs+readFile(t, filepath.Join(site, "rdma/verbs/zverbs_types.go")), want) {
			t.Errorf("the site's package lacks %s", want)
		}
	}

	// The programs that use the generated packages, written once they
	// exist.
	for _, dir := range []string{"foreign", "cmd"} {
		copyTree(t, filepath.Join("testdata", "site", dir), filepath.Join(site, dir))
	}
	out, err = scratch.Go(site, nil, "vet", "./...")
	require.NoError(t, err, "go vet:\n%s", out)

	// One binary: goverbs' packages and three packages generated from
	// other header sets, each reaching the one library the process loaded.
	bin := filepath.Join(t.TempDir(), "foreign")
	out, err = scratch.Go(site, nil, "build", "-o", bin, "./foreign")
	require.NoError(t, err, "go build ./foreign:\n%s", out)
	run, err := exec.Command(bin).CombinedOutput()
	require.NoError(t, err, "foreign:\n%s", run)
	require.Contains(t, string(run), "every package loaded the same library")
	t.Logf("foreign:\n%s", run)

	// Each package's C symbols are its own: the binary holds a trampoline
	// of ibv_open_device for each of the four verbs packages.
	syms, err := exec.Command("nm", bin).CombinedOutput()
	require.NoError(t, err, "nm:\n%s", syms)
	tramps := map[string]bool{}
	for _, s := range regexp.MustCompile(`goverbs_verbs_[0-9a-f]{8}_ibv_open_device`).FindAllString(string(syms), -1) {
		tramps[s] = true
	}
	require.Len(t, tramps, 4, "trampolines of ibv_open_device: %v", tramps)

	// hand/ and the site's package in one test binary, for the VM.
	testOut := os.Getenv("GOVERBS_SITE_TEST_OUT")
	if testOut == "" {
		testOut = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(testOut, 0o755))
	out, err = scratch.Go(site, nil, "test", "-c", "-o", filepath.Join(testOut, "sitecheck.test"), "./cmd/sitecheck")
	require.NoError(t, err, "go test -c ./cmd/sitecheck:\n%s", out)

	// The user's CI steps.
	verify := func(args ...string) (string, error) {
		return scratch.Go(site, nil, append([]string{"tool", "verbsgen", "verify", "-headers", "include"}, args...)...)
	}
	out, err = verify("-dir", "rdma", "-import", "example.com/site/rdma")
	require.NoError(t, err, "verify of the site's own package:\n%s", out)
	out, err = verify()
	require.Error(t, err, "verify of goverbs' packages against grown headers, without -allow-growth:\n%s", out)
	require.Contains(t, out, "verify: compatible")
	out, err = verify("-allow-growth")
	require.NoError(t, err, "verify -allow-growth of goverbs' packages against grown headers:\n%s", out)
	require.Contains(t, out, "verify: compatible")
	t.Logf("verify -allow-growth, goverbs' packages against the site's headers:\n%s", lastLines(out, 9))

	out, err = scratch.Go(site, nil, "test", "./layout")
	require.NoError(t, err, "layout test:\n%s", out)
	out, err = scratch.Go(site, nil, "test", "./layout")
	require.NoError(t, err, "layout test, again:\n%s", out)
	require.Contains(t, out, "(cached)", "the second run should come from the build cache")

	// A header edit that moves a member: lid and sm_lid change places.
	h := filepath.Join(site, "include", "infiniband", "verbs.h")
	edit(t, h, "\tuint16_t\t\tlid;\n\tuint16_t\t\tsm_lid;\n", "\tuint16_t\t\tsm_lid;\n\tuint16_t\t\tlid;\n")
	out, err = verify("-dir", "rdma", "-import", "example.com/site/rdma", "-allow-growth")
	require.Error(t, err, "verify after moving a member:\n%s", out)
	require.Contains(t, out, "incompatible")
	require.Contains(t, out, "struct ibv_port_attr member lid")
	t.Logf("verify after moving ibv_port_attr.lid:\n%s", lastLines(out, 5))

	// The build cache still holds the layout test compiled against the
	// old headers: TestHeaders reads the headers themselves and fails, and
	// TestLayout, seeing them changed, compiles the C side afresh and names
	// the member, as a cold build would.
	out, err = scratch.Go(site, nil, "test", "./layout")
	require.Error(t, err, "layout test after moving a member, warm cache:\n%s", out)
	require.Contains(t, out, "header infiniband/verbs.h in ../include differs")
	require.Contains(t, out, "the build cache held it", "the C side compiled into the test should predate the edit:\n%s", out)
	require.Contains(t, out, "offsetof(struct ibv_port_attr, lid): C says 36, Go says 34")
	require.Contains(t, out, "offsetof(struct ibv_port_attr, sm_lid): C says 34, Go says 36")
	t.Logf("layout test after moving ibv_port_attr.lid, warm cache:\n%s", lastLines(out, 12))
}

// scratchModule lays out testdata/site in a temporary directory, but for the
// programs that use the packages it generates: a module
// that requires this checkout through a replace directive and has
// verbsgen as a tool, with the vendored headers plus the site's additions
// in include/ (with their includes of each other as rdma-core installs
// them) and the pinned 33.2 and 56.1 trees in include33/ and include56/.
func scratchModule(t *testing.T, root string) string {
	t.Helper()
	site := scratch.Module(t, root, "example.com/site", "\ntool github.com/goverbs/goverbs/cmd/verbsgen\n")
	for _, f := range []string{"verbsgen.conventions", "rdma", "r33", "r56"} {
		copyTree(t, filepath.Join("testdata", "site", f), filepath.Join(site, f))
	}
	copyTree(t, filepath.Join(root, "headers", "vendored", "include"), filepath.Join(site, "include"))
	copyTree(t, filepath.Join(root, "headers", "rdma-core-33.2"), filepath.Join(site, "include33"))
	copyTree(t, filepath.Join(root, "headers", "rdma-core-56.1"), filepath.Join(site, "include56"))
	unquoteIncludes(t, filepath.Join(site, "include"))
	addVendorExtensions(t, filepath.Join(site, "include", "infiniband", "verbs.h"))
	return site
}

// addVendorExtensions edits verbs.h as a vendor's rdma-core build differs
// from upstream's: a new access flag, a member appended to
// ibv_device_attr_ex, a new struct, and two functions.
func addVendorExtensions(t *testing.T, verbsH string) {
	t.Helper()
	edit(t, verbsH, "\tIBV_ACCESS_RELAXED_ORDERING\t= IBV_ACCESS_OPTIONAL_FIRST,\n",
		"\tIBV_ACCESS_RELAXED_ORDERING\t= IBV_ACCESS_OPTIONAL_FIRST,\n\tIBV_ACCESS_SITE_VENDOR\t\t= (1<<12),\n")
	edit(t, verbsH, "\tuint32_t phys_port_cnt_ex;\n};\n",
		"\tuint32_t phys_port_cnt_ex;\n\tuint64_t site_vendor_caps;\n};\n\nstruct ibv_site_vendor_attr {\n\tuint32_t flags;\n\tuint64_t cookie;\n};\n")
	edit(t, verbsH, "int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);\n",
		"int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);\n\n"+
			"const char *ibv_get_sysfs_path(void);\n\n"+
			"int ibv_my_vendor_op(struct ibv_context *ctx, uint32_t flags);\n")
}

// quotedInclude is an include headers/vendor.sh made quoted and relative.
var quotedInclude = regexp.MustCompile(`(?m)^#include "([^"]+)"`)

// unquoteIncludes turns the includes vendor.sh rewrote back into the
// <infiniband/...> and <rdma/...> of rdma-core's installed headers, which a
// user's header set has.
func unquoteIncludes(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.h"))
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		sub := filepath.Base(filepath.Dir(f))
		out := quotedInclude.ReplaceAllStringFunc(readFile(t, f), func(m string) string {
			n++
			inc := quotedInclude.FindStringSubmatch(m)[1]
			return "#include <" + filepath.ToSlash(filepath.Clean(filepath.Join(sub, inc))) + ">"
		})
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
	}
	require.NotZero(t, n, "no quoted include in the vendored copy")
}

// edit replaces the one occurrence of old in file with new.
func edit(t *testing.T, file, old, new string) {
	t.Helper()
	s := readFile(t, file)
	require.Equal(t, 1, strings.Count(s, old), "%s: want one %q", file, old)
	require.NoError(t, os.WriteFile(file, []byte(strings.Replace(s, old, new, 1)), 0o644))
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	require.NoError(t, err)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
