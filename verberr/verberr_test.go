package verberr

import (
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/libload"
)

var errGone = errors.New("the library is gone")

func TestSiteErrors(t *testing.T) {
	s := NewSite("ibv_create_qp", nil)
	if s.Err(0) != nil {
		t.Fatal("errno 0 is not an error")
	}
	err := s.Err(syscall.EINVAL)
	if err.Error() != "ibv_create_qp: invalid argument (EINVAL)" {
		t.Errorf("message %q", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Func() != "ibv_create_qp" || e.Errno() != syscall.EINVAL || e.Missing() != nil {
		t.Errorf("As: %+v", e)
	}
	if !errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOMEM) {
		t.Error("errors.Is does not follow the errno")
	}
	if s.Err(syscall.EINVAL) != err {
		t.Error("the same errno gave a new error: the site does not keep it")
	}
	if s.Err(syscall.ENOMEM) == err {
		t.Error("two errnos share an error")
	}
	// An errno beyond the table still works, allocated each time.
	if big := s.Err(300); !errors.Is(big, syscall.Errno(300)) {
		t.Errorf("errno 300: %v", big)
	}
}

func TestSiteMissing(t *testing.T) {
	calls := 0
	s := NewSite("ibv_alloc_dmah", func() error { calls++; return errGone })
	err := s.Err(syscall.ENOSYS)
	if !errors.Is(err, errGone) || !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("%v: want ENOSYS and the availability error", err)
	}
	if err.Error() != "ibv_alloc_dmah: function not implemented (ENOSYS; the library is gone)" {
		t.Errorf("message %q", err)
	}
	s.Err(syscall.ENOSYS)
	s.Err(syscall.EINVAL) // only ENOSYS asks
	if calls != 1 {
		t.Errorf("availability asked %d times, want once", calls)
	}
	// A function that is there: ENOSYS is the provider's, nothing more.
	present := NewSite("ibv_query_ece", func() error { return nil })
	if e := present.Err(syscall.ENOSYS); errors.Is(e, errGone) || e.(*Error).Missing() != nil {
		t.Errorf("present function: %v", e)
	}
}

// Concurrent first failures agree on one error (run with -race).
func TestSiteConcurrent(t *testing.T) {
	s := NewSite("ibv_post_send", nil)
	var wg sync.WaitGroup
	got := make([]error, 16)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = s.Err(syscall.ENOMEM) }()
	}
	wg.Wait()
	for _, e := range got {
		if e != got[0] {
			t.Fatal("concurrent first failures made two errors")
		}
	}
}

func TestNoAllocs(t *testing.T) {
	s := NewSite("ibv_post_recv", nil)
	s.Err(syscall.ENOMEM)
	if n := testing.AllocsPerRun(100, func() {
		if err := s.Err(syscall.ENOMEM); !errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a failure seen before allocates %v times", n)
	}
}

func TestGAIError(t *testing.T) {
	e := &GAIError{Func: "rdma_getaddrinfo", Code: -2, Message: "Name or service not known"}
	if e.Error() != "rdma_getaddrinfo: Name or service not known (EAI -2)" {
		t.Errorf("message %q", e)
	}
}

// Failed picks the errno as the conventions give it: a returned -errno
// first, then for -1 (or NULL) C's errno, then a returned errno, then EIO.
func TestSiteFailed(t *testing.T) {
	s := NewSite("ibv_x", nil)
	for _, tc := range []struct {
		err  error
		r    int64
		want syscall.Errno
	}{
		{syscall.EAGAIN, -1, syscall.EAGAIN},          // -1 and errno
		{nil, int64(syscall.EINVAL), syscall.EINVAL},  // an errno returned
		{nil, -int64(syscall.ENOMEM), syscall.ENOMEM}, // a negated one
		{nil, -1, syscall.EIO},                        // NULL or -1, errno unset
		{syscall.Errno(0), -1, syscall.EIO},
		// A returned errno wins over what an earlier step left in errno:
		// _ibv_query_gid_table's -EINVAL after its ioctl probe's
		// EPROTONOSUPPORT, and an errno returned as is.
		{syscall.EPROTONOSUPPORT, -int64(syscall.EINVAL), syscall.EINVAL},
		{syscall.ENOTTY, int64(syscall.EBUSY), syscall.EBUSY},
	} {
		if got := s.Failed(tc.err, tc.r); got.(*Error).Errno() != tc.want {
			t.Errorf("Failed(%v, %d) = %v, want %v", tc.err, tc.r, got, tc.want)
		}
	}
}

// librdmacm's rdma_seterrno copies a provider's -errno into errno (rxe in
// rdma-core 33.2, siw, cxgb4...): cgo hands it over sign-extended, and
// Failed reads it as the errno it negates, kept like any other.
func TestSiteFailedNegativeErrno(t *testing.T) {
	s := NewSite("rdma_post_recvv", nil)
	n := -int32(syscall.ENOMEM)
	negative := syscall.Errno(n) // what cgo gives for errno = -ENOMEM
	err := s.Failed(negative, -1)
	if !errors.Is(err, syscall.ENOMEM) || err.Error() != "rdma_post_recvv: cannot allocate memory (ENOMEM)" {
		t.Fatalf("Failed(errno -ENOMEM, -1) = %v, want ENOMEM", err)
	}
	if s.Failed(negative, -1) != err || s.Err(syscall.ENOMEM) != err {
		t.Error("a negated errno gets an error of its own, not the site's for ENOMEM")
	}
	if n := testing.AllocsPerRun(100, func() { s.Failed(negative, -1) }); n != 0 {
		t.Errorf("a negated errno seen before allocates %v times", n)
	}
}

// A provider's code (mlx5's CQ_POLL_ERR, -2, from ibv_poll_cq,
// ibv_start_poll or ibv_next_poll) is kept as a code: it matches no errno
// (not ENOENT, an empty CQ), says what it is, and is kept per code.
func TestSiteProviderCode(t *testing.T) {
	s := NewSite("ibv_start_poll", nil)
	err := s.ProviderCode(-2)
	var e *Error
	if !errors.As(err, &e) || e.Code() != -2 || e.Errno() != 0 || e.Func() != "ibv_start_poll" {
		t.Fatalf("ProviderCode(-2) = %#v", err)
	}
	if err.Error() != "ibv_start_poll: failed: provider code -2" {
		t.Errorf("message %q", err)
	}
	for _, errno := range []syscall.Errno{syscall.ENOENT, syscall.EINTR, syscall.EIO} {
		if errors.Is(err, errno) {
			t.Errorf("a provider's code -2 matches %v", errno)
		}
	}
	if s.ProviderCode(-2) != err || s.ProviderCode(-22) == err || s.Err(syscall.ENOENT) == err {
		t.Error("codes are not kept one error each, apart from the errnos")
	}
	if c := s.ProviderCode(-22).(*Error); c.Code() != -22 || errors.Is(c, syscall.EINVAL) {
		t.Errorf("ProviderCode(-22) = %v, code %d: a -errno from a provider is a code too", c, c.Code())
	}
	// Beyond the table: still right, allocated each time.
	if far := s.ProviderCode(-1000).(*Error); far.Code() != -1000 || far.Errno() != 0 {
		t.Errorf("ProviderCode(-1000) = %v", far)
	}
	// Not a code: read as Failed reads it (start_poll's positive errnos).
	if busy := s.ProviderCode(int64(syscall.EBUSY)); !errors.Is(busy, syscall.EBUSY) || busy.(*Error).Code() != 0 {
		t.Errorf("ProviderCode(EBUSY) = %v", busy)
	}
	if n := testing.AllocsPerRun(100, func() { s.ProviderCode(-2) }); n != 0 {
		t.Errorf("a code seen before allocates %v times", n)
	}
	if s.Err(syscall.EINVAL).(*Error).Code() != 0 {
		t.Error("an errno's error has a code")
	}
}

// ibv_rereg_mr fails with an IBV_REREG_MR_ERR_* code and errno set: the
// error has both, kept per pair.
func TestSiteCodeAndErrno(t *testing.T) {
	s := NewSite("ibv_rereg_mr", nil)
	err := s.CodeAndErrno(syscall.EINVAL, -4)
	var e *Error
	if !errors.As(err, &e) || e.Code() != -4 || e.Errno() != syscall.EINVAL || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("CodeAndErrno(EINVAL, -4) = %v", err)
	}
	if err.Error() != "ibv_rereg_mr: invalid argument (EINVAL, code -4)" {
		t.Errorf("message %q", err)
	}
	if s.CodeAndErrno(syscall.EINVAL, -4) != err || s.CodeAndErrno(syscall.EINVAL, -1) == err ||
		s.CodeAndErrno(syscall.ENOMEM, -4) == err || s.Err(syscall.EINVAL) == err {
		t.Error("each code and errno pair is not kept apart")
	}
	if n := testing.AllocsPerRun(100, func() { s.CodeAndErrno(syscall.EINVAL, -4) }); n != 0 {
		t.Errorf("a pair seen before allocates %v times", n)
	}
	// No errno: EIO, with the code. A negated errno, made positive.
	if c := s.CodeAndErrno(nil, -5).(*Error); c.Errno() != syscall.EIO || c.Code() != -5 {
		t.Errorf("CodeAndErrno(nil, -5) = %v", c)
	}
	n := -int32(syscall.ENOMEM)
	if c := s.CodeAndErrno(syscall.Errno(n), -4).(*Error); c.Errno() != syscall.ENOMEM {
		t.Errorf("CodeAndErrno(-ENOMEM, -4) = %v", c)
	}
	// A missing function: ENOSYS, explained, with the code of its -1.
	gone := NewSite("ibv_rereg_mr", func() error { return errGone })
	if m := gone.CodeAndErrno(syscall.ENOSYS, -1).(*Error); !errors.Is(m, errGone) || m.Code() != -1 ||
		m.Error() != "ibv_rereg_mr: function not implemented (ENOSYS, code -1; the library is gone)" {
		t.Errorf("missing: %v", m)
	}
}

// ibv_get_device_index's -1, with no errno, means the kernel gives no
// device indexes: EOPNOTSUPP, saying so, whatever errno was left; the
// loader's -1 and ENOSYS for a missing function stays that.
func TestSiteUnsupported(t *testing.T) {
	const why = "the kernel does not support device indexes"
	s := NewSite("ibv_get_device_index", func() error { return nil })
	err := s.Unsupported(syscall.EPROTONOSUPPORT, why)
	if !errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.EIO) {
		t.Errorf("Unsupported = %v, want EOPNOTSUPP alone", err)
	}
	if err.Error() != "ibv_get_device_index: operation not supported (EOPNOTSUPP; the kernel does not support device indexes)" {
		t.Errorf("message %q", err)
	}
	if s.Unsupported(nil, why) != err || s.Err(syscall.EOPNOTSUPP) == err {
		t.Error("Unsupported's error is not kept apart from the errno's")
	}
	if n := testing.AllocsPerRun(100, func() { s.Unsupported(nil, why) }); n != 0 {
		t.Errorf("Unsupported allocates %v times after the first", n)
	}
	// The function is there: an ENOSYS errno is stale, not the loader's.
	if e := s.Unsupported(syscall.ENOSYS, why); e != err {
		t.Errorf("Unsupported(ENOSYS) with the function present = %v", e)
	}
	gone := NewSite("ibv_get_device_index", func() error { return errGone })
	if e := gone.Unsupported(syscall.ENOSYS, why); !errors.Is(e, syscall.ENOSYS) || !errors.Is(e, errGone) {
		t.Errorf("Unsupported(ENOSYS) with the function missing = %v, want the missing function's ENOSYS", e)
	}
}

// A failure marked NoRDMA (ibv_get_device_list's ENOSYS from a library
// that has the function) matches ErrNoRDMA and its errno and says what it
// means and what to do; the same errno from a function the loader could
// not find (Missing) reads as before and does not match ErrNoRDMA. The
// error is kept: a repeat allocates nothing.
func TestSiteNoRDMA(t *testing.T) {
	const says = "this kernel has no RDMA support: no /sys/class/infiniband_verbs"
	present := NewSite("ibv_get_device_list", func() error { return nil }).NoRDMA(syscall.ENOSYS, says)
	err := present.Err(syscall.ENOSYS)
	if !errors.Is(err, ErrNoRDMA) || !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("%v: want ErrNoRDMA and ENOSYS", err)
	}
	want := "ibv_get_device_list: function not implemented (ENOSYS; " + says + "; load ib_uverbs and a driver)"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Note() != says+"; load ib_uverbs and a driver" || e.Missing() != nil || e.Errno() != syscall.ENOSYS {
		t.Errorf("As: note %q, missing %v, errno %v", e.Note(), e.Missing(), e.Errno())
	}
	if present.Failed(syscall.ENOSYS, -1) != err {
		t.Error("Failed(ENOSYS, -1) made a new error: the site does not keep it")
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := present.Failed(syscall.ENOSYS, -1); !errors.Is(err, ErrNoRDMA) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a no-RDMA failure seen before allocates %v times", n)
	}
	// Another errno of the same function is only itself.
	if other := present.Err(syscall.ENOMEM); errors.Is(other, ErrNoRDMA) || other.(*Error).Note() != "" {
		t.Errorf("ENOMEM: %v matches ErrNoRDMA or has a note", other)
	}

	// The library lacks the function: the loader's ENOSYS, not the kernel's.
	missing := NewSite("ibv_get_device_list", func() error { return errGone }).NoRDMA(syscall.ENOSYS, says)
	err = missing.Err(syscall.ENOSYS)
	if errors.Is(err, ErrNoRDMA) || !errors.Is(err, errGone) || !errors.Is(err, syscall.ENOSYS) {
		t.Errorf("%v: a missing function must match ENOSYS and the loader's error, not ErrNoRDMA", err)
	}
	if err.Error() != "ibv_get_device_list: function not implemented (ENOSYS; the library is gone)" {
		t.Errorf("missing function's message %q", err)
	}

	// librdmacm's ENODEV, on a site with no loader behind it.
	cm := NewSite("rdma_create_event_channel", nil).NoRDMA(syscall.ENODEV, "librdmacm found no RDMA device")
	if err := cm.Err(syscall.ENODEV); !errors.Is(err, ErrNoRDMA) || !errors.Is(err, syscall.ENODEV) ||
		err.Error() != "rdma_create_event_channel: no such device (ENODEV; librdmacm found no RDMA device; load ib_uverbs and a driver)" {
		t.Errorf("ENODEV: %v", err)
	}
	if err := cm.Err(syscall.ENOSYS); errors.Is(err, ErrNoRDMA) {
		t.Errorf("ENOSYS of a site marked for ENODEV: %v matches ErrNoRDMA", err)
	}
	// A site without the mark: ENOSYS is only ENOSYS.
	if err := NewSite("ibv_open_device", func() error { return nil }).Err(syscall.ENOSYS); errors.Is(err, ErrNoRDMA) {
		t.Errorf("unmarked site: %v matches ErrNoRDMA", err)
	}
}

// EOPNOTSUPP and ENOSYS match goverbs' one "not supported" sentinel, as
// the loader's missing-function error does; other errnos and the ENOSYS
// that says this host has no RDMA do not.
func TestNotSupported(t *testing.T) {
	s := NewSite("ibv_alloc_mw", func() error { return nil })
	for _, errno := range []syscall.Errno{syscall.EOPNOTSUPP, syscall.ENOSYS} {
		if err := s.Err(errno); !errors.Is(err, libload.ErrNotSupported) || !errors.Is(err, errno) {
			t.Errorf("%v: want libload.ErrNotSupported and its errno", err)
		}
	}
	if err := s.Unsupported(nil, "no windows"); !errors.Is(err, libload.ErrNotSupported) {
		t.Errorf("Unsupported: %v does not match libload.ErrNotSupported", err)
	}
	if err := s.Err(syscall.EINVAL); errors.Is(err, libload.ErrNotSupported) {
		t.Errorf("%v matches libload.ErrNotSupported", err)
	}
	noRDMA := NewSite("ibv_get_device_list", func() error { return nil }).NoRDMA(syscall.ENOSYS, "no RDMA here")
	if err := noRDMA.Err(syscall.ENOSYS); errors.Is(err, libload.ErrNotSupported) || !errors.Is(err, ErrNoRDMA) {
		t.Errorf("%v: want ErrNoRDMA, not libload.ErrNotSupported", err)
	}
}

// The message names the errno as man pages do; a number Linux gives no
// name (a provider returning garbage) is left to strerror's "errno N".
func TestErrnoName(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		syscall.EPERM: "EPERM", syscall.ENOMEM: "ENOMEM", syscall.EOPNOTSUPP: "EOPNOTSUPP",
		133: "EHWPOISON", 0: "errno 0", 300: "errno 300",
	} {
		if got := ErrnoName(errno); got != want {
			t.Errorf("ErrnoName(%d) = %q, want %q", int(errno), got, want)
		}
	}
	if err := NewSite("ibv_post_send", nil).Err(300); err.Error() != "ibv_post_send: errno 300" {
		t.Errorf("message %q", err)
	}
	if err := NewSite("ibv_post_send", nil).Err(syscall.ENOMEM); err.Error() != "ibv_post_send: cannot allocate memory (ENOMEM)" {
		t.Errorf("message %q", err)
	}
}
