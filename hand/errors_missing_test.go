package hand

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/libload"
)

// A verb that failed with ENOSYS because the installed libibverbs lacks it
// (the generated loader's doing) carries the loader's MissingError: the
// message names the function and the release that has it, and errors.Is
// matches both ErrNotSupported sentinels. ENOSYS from a function that is
// there (a provider's unimplemented verb) stays a plain errno.
func TestVerbErrorNamesMissingFunction(t *testing.T) {
	if err := verbs.Load(); err != nil {
		t.Skipf("rdma-core is not installed here (%v): install libibverbs1", err)
	}
	var missing, present string
	for _, f := range verbs.Functions() {
		if verbs.Available(f) != nil && missing == "" {
			missing = f
		} else if verbs.Available(f) == nil && present == "" {
			present = f
		}
	}
	if missing == "" {
		t.Skipf("the installed libibverbs (%s) has every function of the vendored headers: no missing one to report", verbs.LibraryPath())
	}
	err := verbErr(missing+"(step)", syscall.ENOSYS)
	var me *libload.MissingError
	if !errors.As(err, &me) || me.Function != missing || !errors.Is(err, ErrNotSupported) ||
		!errors.Is(err, libload.ErrNotSupported) || !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("verbErr(%s, ENOSYS) = %v, want it to wrap the loader's MissingError", missing, err)
	}
	if !strings.HasPrefix(err.Error(), missing+"(step): function not implemented (goverbs: "+missing+" is not in the installed") {
		t.Errorf("message %q", err)
	}
	// The NULL-returning verbs' errors go the same way.
	if err := nullErr(missing, syscall.ENOSYS); !errors.As(err, &me) || me.Function != missing {
		t.Errorf("nullErr(%s, ENOSYS) = %v, want it to wrap the loader's MissingError", missing, err)
	}
	if err := verbErr(present, syscall.ENOSYS); errors.Is(err, libload.ErrNotSupported) || err.(*VerbError).Missing != nil {
		t.Errorf("verbErr(%s, ENOSYS) = %v: %s is installed, so the provider said ENOSYS", present, err, present)
	}
}
