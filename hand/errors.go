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

// VerbError is a failed call into libibverbs or librdmacm. Op is the C
// entry point, with the step in parentheses where one verb serves several
// (ibv_modify_qp(RTR)); Errno is what it reported. The message reads
// "ibv_modify_qp(RTR): invalid argument", and errors.Is(err, syscall.EINVAL)
// holds. Hint, when set, says what to do about it.
//
// When the installed rdma-core lacks the function itself (the generated
// loader made the call fail with ENOSYS), Missing is the
// *libload.MissingError that names it and the first release that has it.
// A failure that says this host has no RDMA (ibv_get_device_list's ENOSYS,
// librdmacm's ENODEV) matches verberr.ErrNoRDMA too, and its Hint says what
// it means and what to do.
type VerbError struct {
	Op      string
	Errno   syscall.Errno
	Hint    string
	Missing error
	noRDMA  bool // the stub's error matched verberr.ErrNoRDMA
}

func (e *VerbError) Error() string {
	s := e.Op + ": " + e.Errno.Error()
	if e.Missing != nil {
		s += " (" + e.Missing.Error() + ")"
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns the errno, so errors.Is(err, syscall.ENOMEM) works,
// Missing when set, so errors.As(err, &missing) does too,
// and verberr.ErrNoRDMA for a failure that says this host has no RDMA.
func (e *VerbError) Unwrap() []error {
	errs := []error{e.Errno}
	if e.Missing != nil {
		errs = append(errs, e.Missing)
	}
	if e.noRDMA {
		errs = append(errs, verberr.ErrNoRDMA)
	}
	return errs
}

// Is reports EOPNOTSUPP and ENOSYS as ErrNotSupported, unless the failure
// says that this host has no RDMA (verberr.ErrNoRDMA).
func (e *VerbError) Is(target error) bool {
	return target == ErrNotSupported && !e.noRDMA && (e.Errno == syscall.EOPNOTSUPP || e.Errno == syscall.ENOSYS)
}

// verbErr returns the error of a generated stub (a *verberr.Error, which
// names the C function, its errno and, for ENOSYS, the missing function or
// library) as a *VerbError for op, the C name with the step in parentheses
// where hand uses one verb for several; what the error's note says (what
// the failure means where the errno cannot say) is its Hint, and it still
// matches verberr.ErrNoRDMA if the stub's error did. nil stays nil; any
// other error (a *verberr.GAIError), and a *verberr.Error carrying a code
// of the function's own (verberr.Error.Code), which a VerbError has no room
// for, are returned as is.
func verbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ve *verberr.Error
	if !errors.As(err, &ve) || ve.Code() != 0 {
		return err
	}
	return &VerbError{Op: op, Errno: ve.Errno(), Missing: ve.Missing(), Hint: ve.Note(),
		noRDMA: errors.Is(ve, verberr.ErrNoRDMA)}
}

// pollCQErr is verbErr for ibv_poll_cq: its negative result, the
// provider's own code (verberr.Error.Code), is a *PollError, as a Poller's
// failure is.
func pollCQErr(err error) error {
	var ve *verberr.Error
	if errors.As(err, &ve) && ve.Errno() == 0 && ve.Code() != 0 {
		return &PollError{Op: ve.Func(), Ret: ve.Code()}
	}
	return verbErr("ibv_poll_cq", err)
}

// errnoErr is verbErr for an errno a fast-path entry point of hand.c
// returned (the posts and polls, whose inlines call provider ops, never a
// function the loader could lack): a *VerbError for op, or nil for 0.
func errnoErr(op string, errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return &VerbError{Op: op, Errno: errno}
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
