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

// TestLoadRejectsUnbalancedDefine: cc/v4 would spin forever on this header;
// Load must answer at once with the file and line.
func TestLoadRejectsUnbalancedDefine(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "infiniband"), 0o755))
	hdr := "struct ibv_x { int a; };\n#define IBV_BAD ((void *\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "infiniband", "verbs.h"), []byte(hdr), 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir, []string{"infiniband/verbs.h"})
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, strings.HasSuffix(err.Error(), "infiniband/verbs.h:2: macro IBV_BAD has unbalanced parentheses"), err.Error())
		require.NotContains(t, err.Error(), "\n")
	case <-time.After(30 * time.Second):
		t.Fatal("Load did not return within 30 s: the unbalanced #define reached cc/v4")
	}
}
