// Package verberr is the error a generated stub returns when its C function
// fails: the function's C name, the errno it reported (or the code of its
// own it returned) and, when the installed rdma-core lacks the function
// altogether, why.
//
// The generated packages (generated/verbs, generated/rdmacm) give every
// function that can fail one Site. A Site hands out one *Error per errno
// (and code) and keeps it, so a failing call on the data path
// (ibv_post_send out of room, ENOMEM) allocates only the first time that
// function fails with that errno.
// The errors are shared and immutable: compare them with errors.Is, read
// them with errors.As.
//
// A host without RDMA is told apart from a missing function: the failures
// that say this host has no RDMA to offer (ibv_get_device_list's ENOSYS
// from a library that has the function, librdmacm's ENODEV from
// rdma_get_devices and rdma_create_event_channel) match ErrNoRDMA and say
// what to do; a function the installed rdma-core lacks matches its
// loader's error instead (see Error.Missing), never ErrNoRDMA.
package verberr

import (
	"errors"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/goverbs/goverbs/libload"
)

// ErrNoRDMA is matched (errors.Is) by the failure of a function whose
// errno, there, means that this host has no RDMA to offer: the kernel has
// no RDMA support (no ib_uverbs: libibverbs' ibv_get_device_list fails
// with ENOSYS when /sys/class/infiniband_verbs or its abi_version is
// missing), or, where the library cannot tell that from the next case, no
// RDMA device (librdmacm's ENODEV, which it gives for both). The error
// still matches its errno, and its message says what the failure means
// and what to do (noRDMAHint). The generated packages mark these failures
// from verbsgen's NoRDMA table (Site.NoRDMA).
var ErrNoRDMA = errors.New("goverbs: no RDMA on this host")

// noRDMAHint is what a failure matching ErrNoRDMA says to do, after what it
// means: the one place this advice is written.
const noRDMAHint = "load ib_uverbs and a driver"

// Error is a failed C call. errors.Is(err, syscall.EINVAL) holds when the
// function reported EINVAL; when the library lacks the function, errors.Is
// also matches what Missing matches (libload.ErrNotSupported, or
// libload.ErrNoLibrary when rdma-core is not installed at all). EOPNOTSUPP
// and ENOSYS match libload.ErrNotSupported, except a failure matching
// ErrNoRDMA. A failure
// that a provider reported with a code of its own (Code, with Errno 0)
// matches no errno.
type Error struct {
	fn      string
	errno   syscall.Errno
	code    int
	note    string // what the failure means, when its errno alone cannot say
	missing error
	wrapped []error // what Unwrap returns, made once: errors.Is on the data path allocates nothing
}

// Func is the C name of the function that failed ("ibv_create_qp").
func (e *Error) Func() string { return e.fn }

// Errno is what the function reported; 0 when it reported only a
// provider's code (see Code).
func (e *Error) Errno() syscall.Errno { return e.errno }

// Code is the negative result the function returned, for the functions
// whose stub says that result is a code of their own rather than a
// -errno (gen.ConventionRule.NegativeCode); 0 for every other failure:
//
//   - ibv_poll_cq, ibv_start_poll and ibv_next_poll: a provider's code,
//     and Errno is 0. mlx4, mlx5, mthca, hns and vmw_pvrdma return
//     CQ_POLL_ERR, -2, for a completion they cannot parse, which as a
//     -errno would read as ENOENT, an empty CQ; other providers return a
//     -errno that cannot be told from such a code, so none is read as one.
//   - ibv_rereg_mr: one of the IBV_REREG_MR_ERR_* codes (verbs.ReregMRErr*),
//     beside the errno it set. The code says what may still be used
//     (ibv_rereg_mr(3)): the old MR after ERR_INPUT (-1) and
//     ERR_DONT_FORK_NEW (-2), the new one after ERR_DO_FORK_OLD (-3),
//     neither after ERR_CMD (-4) and ERR_CMD_AND_DO_FORK_NEW (-5).
func (e *Error) Code() int { return e.code }

// Note is what the failure means when its errno alone cannot say, as
// the message gives it in parentheses: what an Unsupported failure means
// ("the kernel does not support device indexes"), or, for a failure that
// matches ErrNoRDMA, what it means and what to do; "" otherwise.
func (e *Error) Note() string { return e.note }

// Missing is, when the function failed with ENOSYS because the loaded
// library lacks it (or no library could be loaded), the loader's error that
// names what is missing; nil otherwise.
func (e *Error) Missing() error { return e.missing }

// Error reads "ibv_create_qp: invalid argument (EINVAL)": the function,
// strerror's text and, in parentheses, the errno's name (the one its man
// page gives), then the code when there is one ("ibv_rereg_mr: invalid
// argument (EINVAL, code -1)"), what the failure means when the errno
// cannot say ("ibv_get_device_index: operation not supported (EOPNOTSUPP;
// the kernel does not support device indexes)") and the loader's account
// when the function is missing. A provider's code alone reads
// "ibv_poll_cq: failed: provider code -2".
func (e *Error) Error() string {
	if e.errno == 0 {
		return e.fn + ": failed: provider code " + strconv.Itoa(e.code)
	}
	s := e.fn + ": " + e.errno.Error()
	more := "" // what the parentheses hold
	if int(e.errno) < len(errnoNames) {
		more = errnoNames[e.errno] // strerror's "errno 300" names an unnamed one already
	}
	if e.code != 0 {
		more = join(more, ", ", "code "+strconv.Itoa(e.code))
	}
	if e.note != "" {
		more = join(more, "; ", e.note)
	}
	if e.missing != nil {
		more = join(more, "; ", e.missing.Error())
	}
	if more != "" {
		s += " (" + more + ")"
	}
	return s
}

// join is a and b with sep between them, or b alone when a is empty.
func join(a, sep, b string) string {
	if a == "" {
		return b
	}
	return a + sep + b
}

// ErrnoName is errno's name on Linux ("EINVAL"), or "errno N" for a
// number that has none.
func ErrnoName(errno syscall.Errno) string {
	if int(errno) < len(errnoNames) && errnoNames[errno] != "" {
		return errnoNames[errno]
	}
	return "errno " + strconv.FormatUint(uint64(errno), 10)
}

// Unwrap returns the errno (none for a provider's code alone) and, when
// set, the missing-function error. The slice is shared: do not modify it.
func (e *Error) Unwrap() []error { return e.wrapped }

// maxErrno bounds the errnos a Site keeps; Linux's are below 134. A larger
// one (a provider returning garbage) gets a fresh *Error each time. Codes
// (Error.Code) are kept from -1 down to -(maxCode-1), as errnos are.
const (
	maxErrno = 256
	maxCode  = 256
)

// errnoTable holds a Site's errors by errno, for one code (0: none).
type errnoTable [maxErrno]atomic.Pointer[Error]

// Site is where one C function's errors come from. Its zero value is not
// usable: the generated packages declare one per failing function with
// NewSite.
type Site struct {
	fn string
	// available reports why the function cannot be called (the library or
	// the function is missing), or nil; consulted only for ENOSYS, the
	// errno the loader gives a call it cannot make.
	available func() error
	// noRDMA, if not 0, is the errno that from fn means that this host
	// has no RDMA to offer, and noRDMASays what that is (NoRDMA).
	noRDMA     syscall.Errno
	noRDMASays string
	errs       atomic.Pointer[errnoTable]
	codes      atomic.Pointer[[maxCode]atomic.Pointer[errnoTable]] // by -code, made when a code first comes
	unsup      atomic.Pointer[Error]                               // Unsupported's
}

// NewSite returns the Site of the C function fn. available, if not nil,
// reports whether the loaded library has fn (nil when it has): an ENOSYS
// from fn then names the missing function or library.
func NewSite(fn string, available func() error) *Site {
	return &Site{fn: fn, available: available}
}

// NoRDMA marks errno, from the site's function, as the failure that means
// this host has no RDMA to offer; says is what it means there ("this
// kernel has no RDMA support: no /sys/class/infiniband_verbs"). The
// site's error for errno, without a code, then matches ErrNoRDMA as well as
// errno and reads "ibv_get_device_list: function not implemented (SAYS;
// load ib_uverbs and a driver)". An ENOSYS for which available reports
// a missing function or library is that failure instead, and does not
// match ErrNoRDMA. NoRDMA returns s, for the generated declarations: call
// it before the site's first use.
func (s *Site) NoRDMA(errno syscall.Errno, says string) *Site {
	s.noRDMA, s.noRDMASays = errno, says
	return s
}

// Func is the C name of the site's function.
func (s *Site) Func() string { return s.fn }

// Err returns nil for errno 0, otherwise the site's *Error for errno. The
// same errno gives the same *Error every time after the first, so the
// data path pays no allocation for a failure it has seen before.
func (s *Site) Err(errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return s.kept(0, errno)
}

// kept returns the site's *Error for code and errno, made the first time
// and kept when both are within the tables' bounds.
func (s *Site) kept(code int, errno syscall.Errno) *Error {
	if errno >= maxErrno || code > 0 || code <= -maxCode {
		return s.newError(code, errno)
	}
	var table *errnoTable
	if code == 0 {
		table = made(&s.errs)
	} else {
		table = made(&made(&s.codes)[-code])
	}
	if e := table[errno].Load(); e != nil {
		return e
	}
	table[errno].CompareAndSwap(nil, s.newError(code, errno))
	return table[errno].Load()
}

// made returns *p, set to a new T by the first caller to find it nil.
func made[T any](p *atomic.Pointer[T]) *T {
	if t := p.Load(); t != nil {
		return t
	}
	p.CompareAndSwap(nil, new(T))
	return p.Load()
}

// Failed is Err for a call that failed, from the result r and what cgo's
// two-result call gave (err, the errno C left), in this order:
//
//   - r below -1: -r, an errno the function returned negated. errno is not
//     read: a function that returns -errno need not set it, and may leave
//     one from an earlier step (_ibv_query_gid_table falls back from an
//     ioctl that left EPROTONOSUPPORT, then returns -EINVAL).
//   - r = -1: the errno C set, if it set one. A negative errno is taken as
//     its negation: librdmacm's rdma_seterrno copies a provider's -errno
//     into errno as is (the rdma_post_* and rdma_get_*_comp inlines).
//   - r above 0: r, an errno returned.
//   - else EIO: the function failed without saying why.
//
// A stub passes r = -1 for a NULL result, and err = nil for a function
// that returns its errno. It is never nil.
func (s *Site) Failed(err error, r int64) error {
	switch {
	case r < -1:
		return s.Err(syscall.Errno(-r))
	case r == -1:
		return s.Err(errnoOr(err, syscall.EIO))
	case r > 0:
		return s.Err(syscall.Errno(r))
	}
	return s.Err(syscall.EIO)
}

// ProviderCode is the error of a call whose negative result r is the
// provider's own code, not a -errno, and which set no errno: ibv_poll_cq,
// ibv_start_poll and ibv_next_poll (see Error.Code). Its Errno is 0, its
// Code r, and it matches no errno: CQ_POLL_ERR (-2) must not read as
// ENOENT, which from ibv_start_poll and ibv_next_poll means an empty CQ.
// Each code is kept, as Err keeps each errno. An r of 0 or more (no code)
// is read as Failed reads it, with no errno.
func (s *Site) ProviderCode(r int64) error {
	if r >= 0 {
		return s.Failed(nil, r)
	}
	return s.kept(int(r), 0)
}

// CodeAndErrno is the error of a call that failed with a negative code of
// its own, r, and errno set (ibv_rereg_mr's IBV_REREG_MR_ERR_*): the errno
// C set, as Failed reads it for -1 (EIO when none), and Code r. Each code
// and errno pair is kept. An r of 0 or more (no code) is read as Failed
// reads it.
func (s *Site) CodeAndErrno(err error, r int64) error {
	if r >= 0 {
		return s.Failed(err, r)
	}
	return s.kept(int(r), errnoOr(err, syscall.EIO))
}

// Unsupported is the error of a call that returned -1 to say that it has
// nothing to give here, setting no errno: ibv_get_device_index, whose -1
// means that the kernel does not support device indexes
// (ibv_get_device_index(3)). It matches EOPNOTSUPP and says why:
// "ibv_get_device_index: operation not supported (the kernel does not
// support device indexes)". why is the same at every call of a site (the
// error is made once, with the first). The loader's own -1 for a function
// it cannot call, with errno (err) ENOSYS, is that failure instead, as
// Err(ENOSYS) gives it.
func (s *Site) Unsupported(err error, why string) error {
	if e, ok := err.(syscall.Errno); ok && e == syscall.ENOSYS {
		if missing := s.kept(0, syscall.ENOSYS); missing.missing != nil {
			return missing
		}
	}
	if e := s.unsup.Load(); e != nil {
		return e
	}
	e := s.newError(0, syscall.EOPNOTSUPP)
	e.note = why
	s.unsup.CompareAndSwap(nil, e)
	return s.unsup.Load()
}

// errnoOr returns the errno C set (err), made positive, or otherwise.
func errnoOr(err error, otherwise syscall.Errno) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok && e != 0 {
		return positive(e)
	}
	return otherwise
}

// positive is errno made positive: cgo sign-extends C's int errno, so a
// negative one is a huge Errno whose low 32 bits are negative.
func positive(errno syscall.Errno) syscall.Errno {
	if n := int32(errno); n < 0 {
		return syscall.Errno(-int64(n))
	}
	return errno
}

func (s *Site) newError(code int, errno syscall.Errno) *Error {
	e := &Error{fn: s.fn, errno: errno, code: code}
	if errno == syscall.ENOSYS && s.available != nil {
		// Whether the library has the function does not change once it
		// is loaded, and a call that got here has loaded it (or failed
		// to, which does not change either): the answer can be kept.
		e.missing = s.available()
	}
	if errno != 0 {
		e.wrapped = []error{e.errno}
	}
	if e.missing != nil {
		e.wrapped = append(e.wrapped, e.missing)
	}
	noRDMA := errno != 0 && errno == s.noRDMA && code == 0 && e.missing == nil
	if noRDMA {
		e.note = s.noRDMASays + "; " + noRDMAHint
		e.wrapped = append(e.wrapped, ErrNoRDMA)
	}
	if (errno == syscall.EOPNOTSUPP || errno == syscall.ENOSYS) && e.missing == nil && !noRDMA {
		e.wrapped = append(e.wrapped, libload.ErrNotSupported)
	}
	return e
}

// GAIError is a failure that carries a getaddrinfo(3) code (EAI_*) rather
// than an errno: rdma_getaddrinfo returns the code of the resolver it calls
// as is. Message is gai_strerror's text.
type GAIError struct {
	Func    string
	Code    int
	Message string
}

func (e *GAIError) Error() string {
	return e.Func + ": " + e.Message + " (EAI " + strconv.Itoa(e.Code) + ")"
}
