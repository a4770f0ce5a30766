package hand

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/goverbs/goverbs/libload"
	"github.com/goverbs/goverbs/verberr"
)

// ErrClosed is returned by every method of a control-path object (Context,
// PD, MR, CQ, CompChannel, QP, SRQ, AH, MW, Listener, Conn) called after the
// object's Close, by a Wait or Accept that Close interrupted, and by a
// Poller's or ExPoller's Poll after the poller's Close.
var ErrClosed = errors.New("goverbs: object is closed")

// ErrNotSupported is what errors.Is matches for any failure meaning "this
// device, provider or library does not do that": EOPNOTSUPP (the errno
// libibverbs and the kernel use), ENOSYS (some providers' unimplemented
// verbs, and a function the installed rdma-core lacks), and the checks this
// package makes itself (ODP on a device without it, an extended CQ the
// provider cannot create). It is libload.ErrNotSupported, which the
// generated packages' errors match alike. A host with no RDMA at all
// (verberr.ErrNoRDMA) does not match it.
var ErrNotSupported = libload.ErrNotSupported

// notSupportedError is a refusal this package makes itself for want of a
// device capability: its message says what is missing, once, and it
// matches ErrNotSupported.
type notSupportedError struct{ msg string }

func (e *notSupportedError) Error() string { return e.msg }

// Is matches ErrNotSupported.
func (e *notSupportedError) Is(target error) bool { return target == ErrNotSupported }

// VerbError is a failed call into libibverbs or librdmacm (or a C library
// call of this package's own: eventfd, epoll_wait, fcntl): the
// *verberr.Error every generated stub returns, the same type and, where
// this package adds nothing to it, the same value. Its message reads
// "ibv_reg_mr: cannot allocate memory (ENOMEM)"; Func is the C name,
// Errno what it reported, and errors.Is(err, syscall.ENOMEM) holds.
//
// Where one verb serves several steps, or a step needs saying, this
// package wraps it (fmt.Errorf with %w) in what it was doing: "QP to RTR:
// ibv_modify_qp: invalid argument (EINVAL)", "port 2: ibv_query_port:
// ..."; errors.As(err, &ve) with a *VerbError finds it either way.
//
// When the installed rdma-core lacks the function itself (the generated
// loader made the call fail with ENOSYS), Missing is the
// *libload.MissingError that names it and the first release that has it.
// EOPNOTSUPP and ENOSYS match ErrNotSupported, except a failure that says
// this host has no RDMA (ibv_get_device_list's ENOSYS, librdmacm's
// ENODEV), which matches verberr.ErrNoRDMA instead, and whose Note says
// what it means and what to do. Errors of one function and errno are
// made once and shared: compare them with errors.Is, never modify them.
type VerbError = verberr.Error

// The C functions whose errno this package reads itself, outside the
// generated stubs: hand.c's entry points and system calls. Like a stub's,
// each Site makes its *VerbError once per errno, so that a failure on a
// wait path allocates only the first time.
var (
	siteGetCqEvent  = verberr.NewSite("ibv_get_cq_event", nil)
	siteReqNotifyCq = verberr.NewSite("ibv_req_notify_cq", nil)
	siteGetaddrinfo = verberr.NewSite("rdma_getaddrinfo", nil)
	siteEventfd     = verberr.NewSite("eventfd", nil)
	siteEpollWait   = verberr.NewSite("epoll_wait", nil)
	siteFcntl       = verberr.NewSite("fcntl", nil)
	siteGetrlimit   = verberr.NewSite("getrlimit", nil)
	siteSetrlimit   = verberr.NewSite("setrlimit", nil)
)

// pollCQErr is ibv_poll_cq's error as CQ.Poll returns it: its negative
// result, the provider's own code (verberr.Error.Code), is a *PollError,
// as a Poller's failure is; any other error is the stub's, as is.
func pollCQErr(err error) error {
	var ve *verberr.Error
	if errors.As(err, &ve) && ve.Errno() == 0 && ve.Code() != 0 {
		return &PollError{Op: ve.Func(), Ret: ve.Code()}
	}
	return err
}

// AttrError is an attribute this package refused before calling C, because
// the verb would fail on it (often with a bare EINVAL that names nothing) or,
// worse, succeed and leave a QP that never talks. It wraps EINVAL.
type AttrError struct {
	Op     string // the method, e.g. "QP.ToRTR"
	Field  string // the attribute, e.g. "MTU"
	Reason string
}

func (e *AttrError) Error() string { return "goverbs: " + e.Op + ": " + e.Field + ": " + e.Reason }

// Unwrap returns syscall.EINVAL.
func (e *AttrError) Unwrap() error { return syscall.EINVAL }

// checkRange refuses v outside lo to hi, before a conversion to the C
// field's narrower type would wrap it (a negative count to 2^32-1, 2^32 to
// 0). hi is unsigned so that math.MaxUint32 needs no int to hold it.
func checkRange(op, field string, v, lo int, hi uint64) error {
	if v < lo || uint64(v) > hi {
		return &AttrError{Op: op, Field: field, Reason: fmt.Sprintf("%d: must be %d to %d", v, lo, hi)}
	}
	return nil
}

// BusyError is returned by Close on an object that other live objects
// depend on: a PD with MRs or QPs, a CQ that a QP uses, a Context with PDs.
// Nothing is closed; close the Children (named in the message) first. It
// matches syscall.EBUSY, which is what the kernel would have said, without
// saying which.
//
// This package never closes children implicitly: a child closed behind its
// owner's back (an MR under a buffer a peer still writes into, a QP a poller
// still reads) is a worse failure than an error at Close.
//
// Close on an object that another owns (the QP of a Conn) is a BusyError
// too, naming the Owner, whose Close closes it.
type BusyError struct {
	Object   string   // the object Close was called on, e.g. "PD 0x3"
	Children []string // what still depends on it, e.g. "MR lkey 0x104 (4096 bytes)"
	Owner    string   // what owns Object and closes it, e.g. "its Conn"; empty for an object of its own
}

func (e *BusyError) Error() string {
	if e.Owner != "" {
		return "goverbs: cannot close " + e.Object + ": it belongs to " + e.Owner + ", whose Close closes it"
	}
	return "goverbs: cannot close " + e.Object + ": still used by " + strings.Join(e.Children, ", ") + "; close them first"
}

// Is matches syscall.EBUSY.
func (e *BusyError) Is(target error) bool { return target == syscall.EBUSY }

// ErrCQOverrun is what errors.Is matches for an *OverrunError: a CQ
// overflowed and the device dropped completions.
var ErrCQOverrun = errors.New("goverbs: CQ overrun")

// OverrunError is what every poll of a CQ returns, once the CQ is empty,
// after Context.NextEvent or Events read an IBV_EVENT_CQ_ERR naming it:
// the device had no room for a completion and dropped it, so which work
// requests of the CQ's QPs finished is no longer known. It matches
// ErrCQOverrun. See CQ for what a program should do.
type OverrunError struct {
	CQ   string // the CQ, e.g. "CQ 0x5"
	Size int    // its entries when the overrun was seen
}

func (e *OverrunError) Error() string {
	return fmt.Sprintf("goverbs: %s (%d entries) overran: the device dropped completions it had no room for "+
		"(IBV_EVENT_CQ_ERR); close its QPs and make a CQ that holds every completion they can have outstanding", e.CQ, e.Size)
}

// Is matches ErrCQOverrun.
func (e *OverrunError) Is(target error) bool { return target == ErrCQOverrun }
