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
// (the generated loader's doing) carries the loader's MissingError through
// the stub's error, which this package returns as is (a VerbError): the
// message names the function and the release that has it, and
// errors.Is matches ErrNotSupported (libload's). ENOSYS from a function
// that is there (a provider's unimplemented verb) stays a plain errno.
func TestVerbErrorNamesMissingFunction(t *testing.T) {
	if err := verbs.Load(); err != nil {
		t.Skipf("rdma-core is not installed here (%v): install libibverbs1", err)
	}
	// ibv_alloc_dmah (rdma-core 56.1) and ibv_query_port_speed (65.0):
	// called with nil arguments, a missing one fails before using them.
	var missing string
	var err error
	switch {
	case verbs.Available("ibv_alloc_dmah") != nil:
		missing = "ibv_alloc_dmah"
		_, err = verbs.AllocDmah(nil, nil)
	case verbs.Available("ibv_query_port_speed") != nil:
		missing = "ibv_query_port_speed"
		err = verbs.QueryPortSpeed(nil, 1, nil)
	default:
		t.Skipf("the installed libibverbs (%s) has ibv_alloc_dmah and ibv_query_port_speed: no missing function to call", verbs.LibraryPath())
	}
	var ve *VerbError
	if !errors.As(err, &ve) || ve.Func() != missing || ve.Missing() == nil {
		t.Fatalf("%s with the function missing: %v, want a *VerbError with Missing set", missing, err)
	}
	var me *libload.MissingError
	if !errors.As(err, &me) || me.Function != missing || !errors.Is(err, ErrNotSupported) ||
		!errors.Is(err, libload.ErrNotSupported) || !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("%s with the function missing: %v, want the loader's MissingError", missing, err)
	}
	if !strings.HasPrefix(err.Error(), missing+": function not implemented (ENOSYS; goverbs: "+missing+" is not in the installed") {
		t.Errorf("message %q", err)
	}
}
