// Package isolate checks, on the host, that goverbs' committed packages
// compile against their vendored headers whatever a site puts in the C
// compiler's environment. (That they link beside a package generated from
// other headers is tests/ownheaders' to prove.)
package isolate

import (
	"os"
	"os/exec"
	"strings"
	"testing"

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
