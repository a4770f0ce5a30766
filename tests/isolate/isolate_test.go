// Package isolate checks, on the host, that goverbs' generated packages live
// beside a package a user generated from their own headers, in one program,
// and that the committed packages compile against their vendored headers
// whatever a site puts in the C compiler's environment.
package isolate

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repo is the module root, from this package's directory.
const repo = "../.."

// run runs name args in dir with extra environment, and returns its
// combined output; it fails the test when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := command(dir, env, name, args...)
	require.NoError(t, err, "%s %s in %s:\n%s", name, strings.Join(args, " "), dir, out)
	return out
}

func command(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// copyTree copies the regular files of src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
}

// userMain is a program that uses hand/, goverbs' generated/verbs and the
// user's own verbs package together.
const userMain = `package main

import (
	"fmt"

	"example.com/user/gen/verbs"
	"github.com/goverbs/goverbs/crecord"
	own "github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/hand"
)

func main() {
	fmt.Printf("own load: %v\n", own.Load())
	fmt.Printf("user load: %v\n", verbs.Load())
	fmt.Printf("own path: %q\n", own.LibraryPath())
	fmt.Printf("user path: %q\n", verbs.LibraryPath())
	a, errA := own.Address("ibv_open_device")
	b, errB := verbs.Address("ibv_open_device")
	fmt.Printf("same ibv_open_device: %v (%v, %v)\n", a == b, errA, errB)
	// A call through each package's trampolines.
	var n int32
	_, err := verbs.GetDeviceList(&n)
	fmt.Printf("user GetDeviceList: %d devices, %v\n", n, err)
	_, err = hand.Open("goverbs-isolate-no-such-device")
	fmt.Printf("hand Open: %v\n", err)
	// A hand/ object's raw record as the user's package's type.
	var ctx *own.Context
	fmt.Printf("as: %v\n", crecord.As[verbs.Context](ctx) == nil)
}
`

// TestTwoPackagesOneProgram generates a second copy of the verbs and
// rdmacm packages, at another import path, from a copy of the vendored
// headers with their includes as rdma-core installs them (<...>), and builds and runs a program that links it beside hand/ and
// goverbs' own packages: before each package's C symbols had their own
// prefix, the link failed with 92 multiple definitions.
func TestTwoPackagesOneProgram(t *testing.T) {
	root, err := filepath.Abs(repo)
	require.NoError(t, err)
	mod := t.TempDir()
	copyTree(t, filepath.Join(root, "headers/vendored/include"), filepath.Join(mod, "headers/include"))
	unquoteIncludes(t, filepath.Join(mod, "headers/include"))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/user\n\ngo 1.25.0\n\n"+
		"require github.com/goverbs/goverbs v0.0.0\n\nreplace github.com/goverbs/goverbs => "+root+"\n"), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644))

	run(t, root, nil, "go", "run", "./cmd/verbsgen", "-headers", filepath.Join(mod, "headers/include"),
		"-cgo-include", "-import", "example.com/user/gen", "-out", filepath.Join(mod, "gen"))
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "cmd/both"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "cmd/both/main.go"), []byte(userMain), 0o644))
	bin := filepath.Join(mod, "both")
	run(t, mod, nil, "go", "build", "-o", bin, "./cmd/both")

	syms := run(t, mod, nil, "nm", bin)
	for _, p := range []string{"goverbs_verbs_cf17a4c0_ibv_open_device", "goverbs_rdmacm_"} {
		assert.Contains(t, syms, p, "goverbs' own trampolines")
	}
	userVerbs := regexp.MustCompile(`goverbs_verbs_[0-9a-f]{8}_ibv_open_device`).FindAllString(syms, -1)
	assert.Len(t, uniq(userVerbs), 2, "two packages' trampolines of ibv_open_device: %v", userVerbs)

	out := run(t, mod, nil, bin)
	t.Logf("the program prints:\n%s", out)
	assert.Contains(t, out, "as: true")
	assert.Regexp(t, `hand Open: .+`, out)
	if libs, _ := filepath.Glob("/usr/lib/*/libibverbs.so.1"); len(libs) > 0 {
		assert.Contains(t, out, "own load: <nil>\nuser load: <nil>\n")
		path := regexp.MustCompile(`own path: (".+")\nuser path: (".+")\n`).FindStringSubmatch(out)
		require.Len(t, path, 3, "both library paths")
		assert.Equal(t, path[1], path[2], "both packages reach the same libibverbs")
		assert.Contains(t, out, "same ibv_open_device: true (<nil>, <nil>)")
	} else {
		t.Log("libibverbs.so.1 is not installed: both packages fail to load, as the program shows")
		assert.Contains(t, out, `own path: ""`)
	}
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
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		sub := filepath.Base(filepath.Dir(f))
		out := quotedInclude.ReplaceAllStringFunc(string(src), func(m string) string {
			n++
			inc := quotedInclude.FindStringSubmatch(m)[1]
			return "#include <" + filepath.ToSlash(filepath.Clean(filepath.Join(sub, inc))) + ">"
		})
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
	}
	require.NotZero(t, n, "no quoted include in the vendored copy")
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var u []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			u = append(u, x)
		}
	}
	return u
}
