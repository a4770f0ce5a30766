// Package reach checks what a goverbs binary needs from the machine it runs
// on: no rdma-core library at link time (they are opened at run time), so
// the same binary starts with any rdma-core release or none.
package reach

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoRDMALibrariesNeeded builds every command in cmd/ and reads its ELF
// dynamic section: no DT_NEEDED entry may name libibverbs or librdmacm,
// and none may bind a symbol of theirs at load time.
func TestNoRDMALibrariesNeeded(t *testing.T) {
	cmds, err := filepath.Glob("../../cmd/*")
	if err != nil || len(cmds) == 0 {
		t.Fatalf("no commands under cmd/: %v", err)
	}
	out := t.TempDir()
	args := []string{"build", "-o", out + "/"}
	for _, c := range cmds {
		args = append(args, "./"+filepath.ToSlash(c))
	}
	build := exec.Command("go", args...)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of cmd/: %v\n%s", err, b)
	}
	bins, _ := os.ReadDir(out)
	if len(bins) != len(cmds) {
		t.Fatalf("built %d binaries for %d commands", len(bins), len(cmds))
	}
	for _, b := range bins {
		f, err := elf.Open(filepath.Join(out, b.Name()))
		if err != nil {
			t.Fatal(err)
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		syms, err := f.ImportedSymbols()
		f.Close()
		if err != nil && len(libs) > 0 {
			t.Fatalf("%s: %v", b.Name(), err)
		}
		for _, l := range libs {
			if strings.Contains(l, "ibverbs") || strings.Contains(l, "rdmacm") {
				t.Errorf("%s needs %s at load time", b.Name(), l)
			}
		}
		for _, s := range syms {
			if strings.HasPrefix(s.Name, "ibv_") || strings.HasPrefix(s.Name, "rdma_") || strings.Contains(s.Library, "ibverbs") {
				t.Errorf("%s binds %s (%s) at load time", b.Name(), s.Name, s.Library)
			}
		}
		t.Logf("%s needs only %s", b.Name(), strings.Join(libs, ", "))
	}
}
