// Package scratch makes the throwaway modules the host suites work in as a
// downstream user would: a module outside the repository that requires
// goverbs through a replace directive, and the go command run in it.
package scratch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Module makes an empty module named module in a temporary directory that
// requires the goverbs checkout at root through a replace directive, with
// root's go.sum, and returns its directory. extra is appended to go.mod
// (a tool directive, say).
func Module(t testing.TB, root, module, extra string) string {
	t.Helper()
	dir := t.TempDir()
	gomod := "module " + module + "\n\ngo 1.25.0\n\nrequire github.com/goverbs/goverbs v0.0.0\n\nreplace github.com/goverbs/goverbs => " + root + "\n" + extra
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Go runs the go command in dir with extra environment (and
// GOFLAGS=-mod=mod, so that go.mod and go.sum follow what the module's
// files import) and returns its combined output.
func Go(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Missing ends the test for want, something make test provides through
// target before it runs the tests: in CI a failure, elsewhere a skip that
// names it.
func Missing(t testing.TB, want, target string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s missing in CI: `%s`, which make test runs first, should have provided it", want, target)
	}
	t.Skipf("%s missing: run `%s` first", want, target)
}

// RequireTrees ends the test (Missing) unless each of dirs is a pinned
// header tree that make headers fetched.
func RequireTrees(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "infiniband", "verbs.h")); err != nil {
			Missing(t, "pinned headers "+d, "make headers")
		}
	}
}
