package reach

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// TestStartsWithoutRDMACore runs the Go tools where rdma-core's libraries
// cannot be loaded: in a private mount namespace, the installed
// libibverbs and librdmacm files are covered with an empty file, so dlopen
// fails as it does on a machine without them. Each tool must start, exit
// with its own error status (no crash, no signal) and print the loader's
// error, which names the library and the package to install. (make
// nordma-build and the no-rdma-core root of the version matrix do the same
// on a root filesystem that never had rdma-core.)
func TestStartsWithoutRDMACore(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to hide the libraries in a mount namespace")
	}
	ibv, cm := verbs.LibraryPath(), rdmacm.LibraryPath()
	if ibv == "" || cm == "" {
		t.Skip("rdma-core's libraries are not installed here: install libibverbs1 and librdmacm1 (tests/deps.sh does)")
	}
	out := t.TempDir()
	for _, c := range []string{"goverbs-devinfo", "goverbs-rping"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(out, c), "../../cmd/"+c).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c, err, b)
		}
	}
	for _, tc := range []struct {
		cmd  []string
		want []string
	}{
		{[]string{"goverbs-devinfo"}, []string{"goverbs: cannot load libibverbs.so.1", "install package libibverbs1"}},
		{[]string{"goverbs-rping", "-c", "-a", "127.0.0.1", "-C", "1"}, []string{"goverbs: cannot load librdmacm.so.1", "install package librdmacm1"}},
	} {
		script := `mount --bind /dev/null "$1" && mount --bind /dev/null "$2" && shift 2 && exec "$@"`
		args := append([]string{"-m", "sh", "-c", script, "sh", ibv, cm, filepath.Join(out, tc.cmd[0])}, tc.cmd[1:]...)
		b, err := exec.Command("unshare", args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: want a failing exit, got %v\n%s", tc.cmd[0], err, b)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() || ws.ExitStatus() != 1 {
			t.Errorf("%s: %v, want exit status 1 (its own error, not a crash)", tc.cmd[0], ee)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s printed %q, want %q", tc.cmd[0], b, w)
			}
		}
		t.Logf("%s without rdma-core: %s", tc.cmd[0], strings.TrimSpace(string(b)))
	}
}
