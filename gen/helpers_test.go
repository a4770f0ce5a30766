package gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/gen"
)

// pinnedHeaders returns the include directory of a pinned rdma-core header
// set (headers/rdma-core-VERSION), skipping the test when it has not been
// fetched, or failing it under CI, where a skip would hide the missing setup.
func pinnedHeaders(tb testing.TB, version string) string {
	tb.Helper()
	dir := filepath.Join("..", "headers", "rdma-core-"+version)
	if _, err := os.Stat(filepath.Join(dir, "infiniband", "verbs.h")); err != nil {
		msg := "pinned headers " + dir + " are missing: run `make headers` (or `bash headers/fetch.sh`) first"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg + " (CI is set, so this is a failure, not a skip)")
		}
		tb.Skip(msg)
	}
	return dir
}

// fullConfig is the configuration `go generate ./generated` uses, layout
// package included, writing nowhere until Run is called.
func fullConfig(headers, out string) gen.Config {
	return gen.Config{
		Headers:    headers,
		Out:        filepath.Join(out, "generated"),
		ImportRoot: "github.com/goverbs/goverbs/generated",
		LayoutDir:  filepath.Join(out, "layout"),
		LayoutPkg:  "github.com/goverbs/goverbs/tests/layout",
		Command:    "verbsgen (gen test)",
	}
}

// goTool is the go command: go test puts its own GOROOT/bin first on PATH.
func goTool(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("no go command on PATH to compile the generated code")
	}
	return p
}

// repoRoot is the module root (this package lives in gen/).
func repoRoot(tb testing.TB) string {
	tb.Helper()
	abs, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	return abs
}

// writeTree makes files (path under root -> content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// modelOf loads the headers roots under dir and models them, failing tb
// on either's error.
func modelOf(tb testing.TB, dir string, roots []string) *gen.IR {
	tb.Helper()
	l, err := gen.Load(dir, roots)
	if err != nil {
		tb.Fatal(err)
	}
	ir, err := gen.Model(l)
	if err != nil {
		tb.Fatal(err)
	}
	return ir
}
