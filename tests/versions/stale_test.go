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

const vendored = repo + "/headers/vendored/include"

// copyHeaders copies the vendored include directory to dir.
func copyHeaders(t *testing.T, dir string) {
	t.Helper()
	src, err := filepath.Abs(vendored)
	require.NoError(t, err)
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
}

// editHeader replaces old, which must occur exactly once, with new in the
// header path under dir.
func editHeader(t *testing.T, dir, path, old, new string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(path))
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), old), "%s: want %q exactly once", path, old)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644))
}

// generateLayout generates layout-only packages and their layout test from
// the headers in include (inside module dir tmp, through -cgo-include) into
// out, a directory of tmp.
func generateLayout(t *testing.T, tmp, out, include string) {
	t.Helper()
	const module = "example.com/stale"
	_, err := gen.Run(gen.Config{
		Headers:    include,
		Out:        filepath.Join(out, "generated"),
		ImportRoot: module + "/generated",
		LayoutDir:  filepath.Join(out, "tests", "layout"),
		LayoutPkg:  module + "/tests/layout",
		LayoutOnly: true,
		CgoInclude: true,
		Version:    "65.0",
		Command:    "verbsgen -headers include -cgo-include -layout-only (tests/versions)",
	})
	require.NoError(t, err)
}

// staleModule makes a module with a copy of the vendored headers in
// include/ and layout-only packages generated from them, and returns the
// module's directory and the include directory.
func staleModule(t *testing.T) (tmp, include string) {
	t.Helper()
	tmp = tempModule(t, "example.com/stale")
	include = filepath.Join(tmp, "include")
	copyHeaders(t, include)
	generateLayout(t, tmp, tmp, include)
	return tmp, include
}

// The test of a generated layout package: its test binary is built once
// and its result cached, as in a CI that restores GOCACHE.
func testLayout(tmp string) (string, error) {
	return scratch.Go(tmp, nil, "test", "./tests/layout/")
}

// TestLayoutStaleHeaders shows that the generated layout test cannot pass
// on headers other than its own, whatever the build cache holds: go build
// does not see a change to headers outside the package (the C oracle stays
// compiled against the old ones), but TestHeaders reads them when it runs,
// and go test reruns a test whose files changed.
func TestLayoutStaleHeaders(t *testing.T) {
	t.Parallel()
	tmp, include := staleModule(t)

	out, err := testLayout(tmp)
	t.Logf("go test, first run:\n%s", out)
	require.NoError(t, err, "the layout test of the headers it was generated from failed")
	out, err = testLayout(tmp)
	t.Logf("go test, second run:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, out, "(cached)", "the second run should come from the build cache")

	// Two members' types swapped: both are 4-byte unsigned enums, so no
	// size, offset or sign changes; the digest sees it, and TestLayout,
	// compiling the C side afresh, finds no fact that changed.
	editHeader(t, include, "infiniband/verbs.h",
		"\tenum ibv_wc_status\tstatus;\n\tenum ibv_wc_opcode\topcode;\n",
		"\tenum ibv_wc_opcode\tstatus;\n\tenum ibv_wc_status\topcode;\n")
	out, err = testLayout(tmp)
	t.Logf("go test after the header edit:\n%s", out)
	require.Error(t, err, "the layout test passed on headers it was not generated from")
	require.Contains(t, out, "--- FAIL: TestHeaders")
	require.Contains(t, out, "header infiniband/verbs.h in ../../include differs from the one the layouts were generated from")
	require.Contains(t, out, "regenerate the packages and this test for these headers")
	require.NotContains(t, out, "(cached)")
	require.NotContains(t, out, "--- FAIL: TestLayout")

	// A member moved, with the test binary still the one the build cache
	// holds, compiled against the original headers (the test says so):
	// TestLayout compiles the C side afresh and names the moved members.
	editHeader(t, include, "infiniband/verbs.h",
		"\tuint16_t\t\tlid;\n\tuint16_t\t\tsm_lid;\n", "\tuint16_t\t\tsm_lid;\n\tuint16_t\t\tlid;\n")
	out, err = scratch.Go(tmp, nil, "test", "-v", "-run", "TestLayout", "./tests/layout/")
	t.Logf("go test after moving ibv_port_attr.lid:\n%s", out)
	require.Error(t, err, "the layout test passed with a moved member")
	require.Contains(t, out, "--- FAIL: TestLayout")
	require.Contains(t, out, "the build cache held it", "the test binary should be the cached one, compiled before the edits")
	require.Contains(t, out, "offsetof(struct ibv_port_attr, lid): C says 36, Go says 34")
	require.Contains(t, out, "offsetof(struct ibv_port_attr, sm_lid): C says 34, Go says 36")

	// Without a C compiler when the test runs, the failure says so, and
	// TestHeaders still names the header. (CC set for go test would
	// rebuild the cgo package with it: the binary is built first.)
	bin := filepath.Join(t.TempDir(), "layout.test")
	out, err = scratch.Go(tmp, nil, "test", "-c", "-o", bin, "./tests/layout/")
	require.NoError(t, err, "go test -c:\n%s", out)
	run := exec.Command(bin, "-test.run", "TestLayout|TestHeaders")
	run.Dir = filepath.Join(tmp, "tests", "layout")
	run.Env = append(os.Environ(), "CC=goverbs-no-such-cc")
	b, err := run.CombinedOutput()
	out = string(b)
	t.Logf("the layout test with no C compiler at run time:\n%s", out)
	require.Error(t, err)
	require.Contains(t, out, "header infiniband/verbs.h in ../../include differs")
	require.Contains(t, out, "no C compiler: goverbs-no-such-cc")

	require.NoError(t, os.Remove(filepath.Join(include, "infiniband", "sa.h")))
	out, err = testLayout(tmp)
	require.Error(t, err)
	require.Contains(t, out, "header infiniband/sa.h is gone from ../../include")
}

// TestLayoutRetypedMember changes two members' types at the same offset,
// where neither the record's size nor any offset moves: ibv_send_wr.wr_id
// uint64_t -> uint32_t (next, a pointer, stays at 8) and ibv_wc.vendor_err
// uint32_t -> int32_t. The layout test fails on the digests; to show that
// its member check catches them on its own, the digests are then
// regenerated alone (the test file of a generation from the edited
// headers), and the C oracle, compiled against the edited headers, tells
// the Go side's member types are not theirs.
func TestLayoutRetypedMember(t *testing.T) {
	t.Parallel()
	tmp, include := staleModule(t)
	editHeader(t, include, "infiniband/verbs.h",
		"struct ibv_send_wr {\n\tuint64_t\t\twr_id;\n", "struct ibv_send_wr {\n\tuint32_t\t\twr_id;\n")
	editHeader(t, include, "infiniband/verbs.h", "\tuint32_t\t\tvendor_err;\n", "\tint32_t\t\tvendor_err;\n")

	out, err := testLayout(tmp)
	t.Logf("go test after the edit:\n%s", out)
	require.Error(t, err)
	require.Contains(t, out, "header infiniband/verbs.h in ../../include differs")

	// The digests of the edited headers, and nothing else, from a second
	// generation.
	other := t.TempDir()
	generateLayout(t, tmp, other, include)
	data, err := os.ReadFile(filepath.Join(other, "tests", "layout", "zlayout_test.go"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "tests", "layout", "zlayout_test.go"), data, 0o644))

	out, err = testLayout(tmp)
	t.Logf("go test with the edited headers' digests:\n%s", out)
	require.Error(t, err, "the layout test passed with retyped members")
	require.NotContains(t, out, "TestHeaders")
	require.Contains(t, out, "membersize(struct ibv_send_wr, wr_id): C says 4, Go says 8")
	require.Contains(t, out, "membersigned(struct ibv_wc, vendor_err): C says 1, Go says 0")
	require.NotContains(t, out, "offsetof(struct ibv_send_wr", "no offset moved: only the member checks can catch this")
	require.NotContains(t, out, "sizeof(struct ibv_send_wr)")
}

// TestLayoutStaleMachineHeaders is the warm-cache case of a layout package
// generated without -cgo-include, whose C side compiles against the headers
// the build's flags name (here CGO_CFLAGS, unchanged between the runs, so
// the cache answers): after a header edit that moves a member, TestLayout
// compiles the C side afresh with the same flags and names the member.
func TestLayoutStaleMachineHeaders(t *testing.T) {
	t.Parallel()
	const module = "example.com/stalemachine"
	tmp := tempModule(t, module)
	include := filepath.Join(tmp, "include")
	copyHeaders(t, include)
	_, err := gen.Run(gen.Config{
		Headers:    include,
		Out:        filepath.Join(tmp, "generated"),
		ImportRoot: module + "/generated",
		LayoutDir:  filepath.Join(tmp, "tests", "layout"),
		LayoutPkg:  module + "/tests/layout",
		LayoutOnly: true,
		Version:    "65.0",
		Command:    "verbsgen -headers include -layout-only (tests/versions)",
	})
	require.NoError(t, err)
	env := []string{"CGO_CFLAGS=-I" + include}

	out, err := scratch.Go(tmp, env, "test", "./tests/layout/")
	require.NoError(t, err, "the layout test of the headers it was generated from:\n%s", out)
	editHeader(t, include, "infiniband/verbs.h",
		"\tuint16_t\t\tlid;\n\tuint16_t\t\tsm_lid;\n", "\tuint16_t\t\tsm_lid;\n\tuint16_t\t\tlid;\n")
	out, err = scratch.Go(tmp, env, "test", "./tests/layout/")
	t.Logf("go test after moving ibv_port_attr.lid:\n%s", out)
	require.Error(t, err, "the layout test passed with a moved member")
	require.Contains(t, out, "header infiniband/verbs.h in "+include+" differs")
	require.Contains(t, out, "the build cache held it")
	require.Contains(t, out, "offsetof(struct ibv_port_attr, lid): C says 36, Go says 34")
}
