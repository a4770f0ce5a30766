package libload

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// A library that is not there says rdma-core is not installed and matches
// ErrNoLibrary; one that is there but does not load (dlerror's texts from
// glibc) says so, names the package to reinstall and does not. Both match
// ENOSYS.
func TestLibraryError(t *testing.T) {
	lib := &Library{Soname: "libibverbs.so.1", Package: "libibverbs1"}
	for _, c := range []struct {
		reason   string
		notFound bool
	}{
		{"libibverbs.so.1: cannot open shared object file: No such file or directory", true},
		// Covered with /dev/null, as tests/reach does: dlerror names the file found.
		{"/lib/x86_64-linux-gnu/libibverbs.so.1: file too short", false},
		{"/lib/x86_64-linux-gnu/libibverbs.so.1: wrong ELF class: ELFCLASS32", false},
		{"libibverbs.so.1: cannot open shared object file: Permission denied", false},
		// A library it needs is missing: dlerror names that one.
		{"libnl-3.so.200: cannot open shared object file: No such file or directory", false},
	} {
		err := lib.LoadError(c.reason)
		msg := err.Error()
		if !strings.HasPrefix(msg, "goverbs: cannot load libibverbs.so.1 ("+c.reason+"): ") {
			t.Errorf("%q: %q lacks the soname and dlerror's text", c.reason, msg)
		}
		if got := strings.Contains(msg, "rdma-core is not installed; install package libibverbs1"); got != c.notFound {
			t.Errorf("%q: %q says rdma-core is not installed: %v, want %v", c.reason, msg, got, c.notFound)
		}
		if !c.notFound && !strings.Contains(msg, "could not be loaded; if the library is damaged, reinstall package libibverbs1") {
			t.Errorf("%q: %q, want it to say the library could not be loaded and what to reinstall", c.reason, msg)
		}
		if errors.Is(err, ErrNoLibrary) != c.notFound {
			t.Errorf("%q: errors.Is(ErrNoLibrary) = %v, want %v", c.reason, !c.notFound, c.notFound)
		}
		if !errors.Is(err, syscall.ENOSYS) {
			t.Errorf("%q: does not match ENOSYS", c.reason)
		}
	}
}

// A missing function's error names the pinned release that first declares
// it, says that none does when the table of pinned releases lacks it, and
// dates nothing when the package was generated without that table. Each
// matches ErrNotSupported and ENOSYS.
func TestMissingError(t *testing.T) {
	pinned := &Library{Soname: "libibverbs.so.1", Package: "libibverbs1",
		Since: map[string]string{"ibv_query_device_ex": "33.2", "ibv_reg_dmabuf_mr": "44.0"}}
	undated := &Library{Soname: "libibverbs.so.1", Package: "libibverbs1"}
	const head = "goverbs: %s is not in the installed libibverbs.so.1 (/lib/libibverbs.so.1): "
	for _, c := range []struct {
		lib      *Library
		fn       string
		since    string
		unpinned bool
		tail     string
	}{
		{pinned, "ibv_reg_dmabuf_mr", "44.0", false, "of the rdma-core releases goverbs pins, 44.0 is the first that has it"},
		{pinned, "ibv_my_vendor_op", "", true, "no rdma-core release goverbs pins declares it"},
		{undated, "ibv_reg_dmabuf_mr", "", false, "the headers its package was generated from declare it"},
	} {
		err := c.lib.Missing(c.fn, "/lib/libibverbs.so.1")
		var me *MissingError
		if !errors.As(err, &me) || me.Function != c.fn || me.Since != c.since || me.Unpinned != c.unpinned {
			t.Errorf("Missing(%s) = %#v, want Since %q, Unpinned %v", c.fn, err, c.since, c.unpinned)
		}
		if want := strings.Replace(head, "%s", c.fn, 1) + c.tail; err.Error() != want {
			t.Errorf("Missing(%s):\n got %q\nwant %q", c.fn, err, want)
		}
		if !errors.Is(err, ErrNotSupported) || !errors.Is(err, syscall.ENOSYS) {
			t.Errorf("Missing(%s) = %v: does not match ErrNotSupported and ENOSYS", c.fn, err)
		}
	}
}
