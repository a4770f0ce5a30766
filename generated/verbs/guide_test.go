package verbs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGuideSnippets compiles every Go block of docs/generated.md, the guide
// to using the generated packages alone, so that it cannot drift from their
// API: the complete program (the block that begins with package main) as it
// stands, the others, function declarations, together in one file after
// the imports they use. None may import unsafe: that is the guide's point.
// On a host without RDMA the program also runs, and must fail with
// ibv_get_device_list's error.
func TestGuideSnippets(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "generated.md"))
	require.NoError(t, err)
	var program string
	decls := []string{`package main

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/goverbs/goverbs/cmem"
	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/verberr"
)

// Each import is used once more, so that a snippet that stops using one
// does not fail the build.
var _, _, _, _ = errors.Is, fmt.Errorf, netip.ParseAddr, syscall.Errno(0)
var _, _, _, _ = cmem.Addr[byte], rdmacm.Load, verbs.Load, verberr.NewSite

func main() {}
`}
	blocks := 0
	for rest := string(doc); ; {
		i := strings.Index(rest, "```go\n")
		if i < 0 {
			break
		}
		indent := rest[strings.LastIndex(rest[:i], "\n")+1 : i] // a block in a list item is indented
		rest = rest[i+len("```go\n"):]
		j := strings.Index(rest, "\n"+indent+"```\n")
		require.GreaterOrEqual(t, j, 0, "docs/generated.md: a Go block is not closed")
		var lines []string
		for _, l := range strings.Split(rest[:j], "\n") {
			lines = append(lines, strings.TrimPrefix(l, indent))
		}
		block := strings.Join(lines, "\n") + "\n"
		rest = rest[j:]
		blocks++
		require.NotContains(t, block, `"unsafe"`, "a snippet of docs/generated.md imports unsafe")
		if strings.HasPrefix(block, "package main\n") {
			require.Empty(t, program, "docs/generated.md has two complete programs")
			program = block
			continue
		}
		decls = append(decls, block)
	}
	require.NotEmpty(t, program, "docs/generated.md has no complete program (a block beginning with package main)")
	require.GreaterOrEqual(t, blocks, 6)

	dir := t.TempDir()
	prog := filepath.Join(dir, "program", "main.go")
	snippets := filepath.Join(dir, "snippets", "main.go")
	for f, src := range map[string]string{prog: program, snippets: strings.Join(decls, "\n")} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte(src), 0o644))
		// Run from this module, so that the file's imports resolve to it.
		out, err := exec.Command("go", "vet", f).CombinedOutput()
		require.NoError(t, err, "docs/generated.md: %s does not vet:\n%s\n%s", filepath.Base(filepath.Dir(f)), out, src)
	}

	if _, err := os.Stat("/sys/class/infiniband"); !errors.Is(err, os.ErrNotExist) {
		return // a device may be there: what the program prints depends on it
	}
	out, err := exec.Command("go", "run", prog).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the program ran without error on a host without RDMA:\n%s", out)
	require.Contains(t, string(out), "ibv_get_device_list: function not implemented")
}
