package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUnbalancedDefine(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
		name string
	}{
		{"#define A (1)\n#define B ((void *\n", 2, "B"},
		{"#define F(x) ((x) \\\n  * 2)\n#define G(x) (x\n", 3, "G"},
		{"/* #define X ( */\n#define Y (2) /* ( */\n", 0, ""},
		{"/*\n#define X (\n*/\n#define Z \"(\"\n", 0, ""},
		{"#define C ')'\n", 0, ""},
		{"  #  define H ((1)\n", 1, "H"},
	} {
		line, name := unbalancedDefine(stripComments(c.src))
		require.Equal(t, c.line, line, c.src)
		require.Equal(t, c.name, name, c.src)
	}
}

func TestSplicedLastNewline(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
	}{
		{"", 0},
		{"int a;\n", 0},
		{"int a;", 0},
		{"#define A 1 \\\n  + 2\n", 0},
		{"int a;\n'b\\\n", 2},
		{"int a;\n'b\\", 2},
		{"int a;\r\n\"b\\\r\n", 2},
		{"int a;\n#include <c\\\r", 2},
		{"\\\n\\\n", 2},
	} {
		require.Equal(t, c.line, splicedLastNewline([]byte(c.src)), "%q", c.src)
	}
}

// TestLoadRejectsSplicedLastNewline: cc/v4 would spin forever on this
// header, its character constant never ended; Load must answer at once
// with the file and line.
func TestLoadRejectsSplicedLastNewline(t *testing.T) {
	requireLoadError(t, "struct ibv_x { int a; };\nchar c = 'a\\\n",
		"infiniband/verbs.h:2: the file ends in a line continuation (a backslash before its last newline)")
}

// TestLoadRejectsMissingInclude: cc/v4 ends its input at an #include it
// cannot follow, here inside a declarator, where its parser would spin;
// Load must answer at once with the #include's position.
func TestLoadRejectsMissingInclude(t *testing.T) {
	requireLoadError(t, "struct ibv_x *\n#include <verbsgen_missing.h>\n",
		"infiniband/verbs.h:2:10: include file not found: <verbsgen_missing.h>")
}

// TestLoadPositionlessPreprocessError: cc/v4's preprocessor fails on this
// header with no position ("-: internal error"); Load names the header's
// last line, as for a parse that ends early.
func TestLoadPositionlessPreprocessError(t *testing.T) {
	requireLoadError(t, "#if 1 +\n#endif\n",
		"infiniband/verbs.h:2: unexpected end of input: the last declaration is incomplete")
}

// TestLoadRejectsUnbalancedDefine: cc/v4 would spin forever on this header;
// Load must answer at once with the file and line.
func TestLoadRejectsUnbalancedDefine(t *testing.T) {
	requireLoadError(t, "struct ibv_x { int a; };\n#define IBV_BAD ((void *\n",
		"infiniband/verbs.h:2: macro IBV_BAD has unbalanced parentheses")
}

// requireLoadError loads hdr as infiniband/verbs.h and wants an error, on
// one line, ending in want, within 30 s.
func requireLoadError(t *testing.T, hdr, want string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "infiniband"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "infiniband", "verbs.h"), []byte(hdr), 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir, []string{"infiniband/verbs.h"})
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, strings.HasSuffix(err.Error(), want), err.Error())
		require.NotContains(t, err.Error(), "\n")
	case <-time.After(30 * time.Second):
		t.Fatalf("Load did not return within 30 s: the header reached cc/v4, which spins on it:\n%s", hdr)
	}
}
