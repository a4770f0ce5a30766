package gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/gen"
	"github.com/stretchr/testify/require"
)

// TestMemberAssertions compiles the static layout assertions a package's
// preamble carries (golden case records) with gcc against its header and
// against copies whose members were retyped where no offset or record size
// moves: each must fail the build with a message naming the member and what
// the Go side expects.
func TestMemberAssertions(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the static assertions are C, install gcc to compile them")
	}
	res, err := gen.Build(goldenConfig("records"))
	require.NoError(t, err)
	var preamble string
	for _, f := range res.Files {
		if s := string(f.Data); strings.Contains(s, "#define GOVERBS_LAYOUT") {
			start := strings.Index(s, "#define GOVERBS_LAYOUT")
			end := strings.Index(s, "#undef GOVERBS_LAYOUT")
			require.Greater(t, end, start, "%s: no #undef after the assertions", f.Path)
			preamble = s[start:end]
		}
	}
	require.NotEmpty(t, preamble, "no file carries layout assertions")
	src := "#include <stddef.h>\n#include <stdint.h>\n#include <infiniband/verbs.h>\n" + preamble

	orig, err := os.ReadFile(filepath.Join("testdata", "records", "include", "infiniband", "verbs.h"))
	require.NoError(t, err)
	compile := func(header string) string {
		t.Helper()
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "infiniband"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "infiniband", "verbs.h"), []byte(header), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "assert.c"), []byte(src), 0o644))
		out, _ := exec.Command("gcc", "-fsyntax-only", "-I", dir, filepath.Join(dir, "assert.c")).CombinedOutput()
		return string(out)
	}
	require.Empty(t, compile(string(orig)), "the assertions fail against the headers they were generated from")

	for _, c := range []struct{ name, old, new, want string }{
		{"int to unsigned int", "\tint status;\n", "\tunsigned int status;\n",
			`goverbs: struct ibv_wc member status (offset 8, size 4, signed) differs from rdma-core 0.0-golden`},
		// The union after pkey_index is 8-aligned at 24: a wider
		// pkey_index moves nothing.
		{"uint16_t to uint32_t before padding", "\tuint16_t pkey_index;\n", "\tuint32_t pkey_index;\n",
			`goverbs: struct ibv_wc member pkey_index (offset 16, size 2, unsigned) differs`},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, 1, strings.Count(string(orig), c.old))
			out := compile(strings.Replace(string(orig), c.old, c.new, 1))
			require.Contains(t, out, c.want)
			require.Equal(t, 1, strings.Count(out, "static assertion failed"), "only the retyped member's assertion should fail:\n%s", out)
		})
	}
}
