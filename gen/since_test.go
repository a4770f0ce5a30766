package gen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goverbs/goverbs/gen"
)

// TestPinnedSince: each extern function of the pinned trees is dated by the
// oldest tree that declares it, whatever order the trees are given in; the
// table written reads back the same and is the same bytes each time; a
// static inline is not dated (it is no symbol of the library).
func TestPinnedSince(t *testing.T) {
	dir := filepath.Join("testdata", "loader")
	roots := []string{"infiniband/verbs.h", "rdma/rdma_cma.h"}
	since, err := gen.PinnedSince([]gen.Release{
		{Version: "0.2", Headers: filepath.Join(dir, "include")},
		{Version: "0.1", Headers: filepath.Join(dir, "old", "rdma-core-0.1")}, // has no rdma/rdma_cma.h
	}, roots)
	require.NoError(t, err)
	assert.Equal(t, "0.1", since["ibv_missing_ptr"], "declared by both: the older")
	assert.Equal(t, "0.2", since["ibv_add_one"], "declared by 0.2 only")
	assert.Equal(t, "0.2", since["rdma_absent_int"], "declared by 0.2 only, in a root 0.1 lacks")
	assert.NotContains(t, since, "ibv_add_two", "a static inline")

	var first, second bytes.Buffer
	require.NoError(t, gen.WriteSince(&first, since, []string{"0.2", "0.1"}, "verbsgen since -o FILE a b"))
	require.NoError(t, gen.WriteSince(&second, since, []string{"0.2", "0.1"}, "verbsgen since -o FILE a b"))
	assert.Equal(t, first.String(), second.String())
	assert.Regexp(t, `^# The oldest of the rdma-core releases 0\.1, 0\.2 whose headers declare each extern\n`, first.String())
	assert.Contains(t, first.String(), "#   verbsgen since -o FILE a b\n")
	assert.Regexp(t, regexp.MustCompile(`(?m)^ibv_add_one\t0\.2\n(.*\n)*ibv_missing_ptr\t0\.1$`), first.String(), "sorted by function")
	path := filepath.Join(t.TempDir(), "since.tsv")
	require.NoError(t, os.WriteFile(path, first.Bytes(), 0o644))
	back, err := gen.ReadSince(path)
	require.NoError(t, err)
	assert.Equal(t, since, back)
}

// TestPinnedSinceErrors: a version that cannot be ordered and a tree with
// none of the roots are errors naming the tree.
func TestPinnedSinceErrors(t *testing.T) {
	roots := []string{"infiniband/verbs.h"}
	_, err := gen.PinnedSince([]gen.Release{{Version: "65.0-x", Headers: "testdata/loader/include"}}, roots)
	assert.EqualError(t, err, `release testdata/loader/include: version "65.0-x" is not a dotted number such as 65.0`)
	empty := t.TempDir()
	_, err = gen.PinnedSince([]gen.Release{{Version: "1.0", Headers: empty}}, roots)
	assert.EqualError(t, err, "release "+empty+": none of infiniband/verbs.h is there")
	_, err = gen.PinnedSince(nil, roots)
	assert.Error(t, err)
}

// TestReadSinceErrors: every malformed line is an error naming the file
// and the line.
func TestReadSinceErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"# c\nibv_a\t1.0\nibv_b 1.0\n", `:3: want function<TAB>release, got "ibv_b 1.0"`},
		{"ibv_a\t1.0\t2.0\n", `:1: want function<TAB>release, got "ibv_a\t1.0\t2.0"`},
		{"ibv-a\t1.0\n", `:1: "ibv-a" is not a C function name`},
		{"ibv_a\t65.0-x\n", `:1: ibv_a: release "65.0-x" is not a dotted number such as 65.0`},
		{"ibv_a\t1.0\n\nibv_a\t2.0\n", `:3: ibv_a is listed twice`},
		{"# only a comment\n", `: no function<TAB>release line`},
	} {
		path := filepath.Join(t.TempDir(), "since.tsv")
		require.NoError(t, os.WriteFile(path, []byte(tc.text), 0o644))
		_, err := gen.ReadSince(path)
		assert.EqualError(t, err, path+tc.want, "%q", tc.text)
	}
	_, err := gen.ReadSince(filepath.Join(t.TempDir(), "absent.tsv"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestBadSinceTable: Build refuses a Since table whose release cannot be
// ordered, naming the function, before modelling anything.
func TestBadSinceTable(t *testing.T) {
	_, err := gen.Build(gen.Config{Headers: filepath.Join("testdata", "loader", "include"),
		Since: map[string]string{"ibv_b": "1.0", "ibv_a": "x"}})
	assert.EqualError(t, err, `the release of ibv_a in the Since table, "x", is not a dotted number such as 65.0`)
}

// TestPinned: the table built into gen, made from every pinned release,
// reads (Pinned does not panic) and dates functions by the release that
// first declared them: ibv_open_device is in the oldest pin, 33.2;
// ibv_reg_dmabuf_mr came with 34.0, so the first pin with it is 44.0; no
// static inline and nothing a release does not declare is in it.
func TestPinned(t *testing.T) {
	since := gen.Pinned()
	assert.Equal(t, "33.2", since["ibv_open_device"])
	assert.Equal(t, "44.0", since["ibv_reg_dmabuf_mr"])
	assert.Equal(t, "33.2", since["rdma_create_id"])
	assert.NotContains(t, since, "ibv_post_send", "a static inline")
	assert.NotContains(t, since, "ibv_my_vendor_op")
	since["ibv_open_device"] = "1.0"
	assert.Equal(t, "33.2", gen.Pinned()["ibv_open_device"], "a new map each call")
}
