package hand

import (
	"errors"
	"strings"
	"syscall"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/libload"
)

// ErrClosed is returned by every method of a control-path object (Context,
// PD, MR, CQ, CompChannel, QP, SRQ, AH, MW, Listener, Conn) called after the
// object's Close, and by a Wait or Accept that Close interrupted.
var ErrClosed = errors.New("hand: object is closed")

// ErrNotSupported is what errors.Is matches for any failure meaning "this
// device, provider or library does not do that": EOPNOTSUPP (the errno
// libibverbs and the kernel use), ENOSYS (some providers' unimplemented
// verbs), and the checks this package makes itself (ODP on a device without
// it, an extended CQ the provider cannot create).
var ErrNotSupported = errors.New("hand: not supported by this device")

// VerbError is a failed call into libibverbs or librdmacm. Op is the C
// entry point, with the step in parentheses where one verb serves several
// (ibv_modify_qp(RTR)); Errno is what it reported. The message reads
// "ibv_modify_qp(RTR): invalid argument", and errors.Is(err, syscall.EINVAL)
// holds. Hint, when set, says what to do about it.
//
// When the installed rdma-core lacks the function itself (the generated
// loader made the call fail with ENOSYS), Missing is the
// *libload.MissingError that names it and the first release that has it.
type VerbError struct {
	Op      string
	Errno   syscall.Errno
	Hint    string
	Missing error
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

// Unwrap returns the errno, so errors.Is(err, syscall.ENOMEM) works, and
// Missing when set, so errors.Is(err, libload.ErrNotSupported) does too.
func (e *VerbError) Unwrap() []error {
	if e.Missing != nil {
		return []error{e.Errno, e.Missing}
	}
	return []error{e.Errno}
}

// Is reports EOPNOTSUPP and ENOSYS as ErrNotSupported.
func (e *VerbError) Is(target error) bool {
	return target == ErrNotSupported && (e.Errno == syscall.EOPNOTSUPP || e.Errno == syscall.ENOSYS)
}

// verbErr returns a *VerbError for op, or nil when errno is 0.
func verbErr(op string, errno syscall.Errno) error {
	if errno == 0 {
		return nil
	}
	return &VerbError{Op: op, Errno: errno, Missing: missingFunction(op, errno)}
}

// missingFunction is, for a verb that failed with ENOSYS, the generated
// loader's account of why when the installed library lacks the function
// (op up to its step in parentheses is the C name); nil otherwise.
func missingFunction(op string, errno syscall.Errno) error {
	if errno != syscall.ENOSYS {
		return nil
	}
	fn, _, _ := strings.Cut(op, "(")
	var err error
	switch {
	case strings.HasPrefix(fn, "ibv_"):
		err = verbs.Available(fn)
	case strings.HasPrefix(fn, "rdma_"):
		err = rdmacm.Available(fn)
	}
	if errors.Is(err, libload.ErrNotSupported) || errors.Is(err, libload.ErrNoLibrary) {
		return err
	}
	return nil
}

// rcErr turns the return value of a verb that returns its errno (0, a
// positive errno, or, for some providers, a negative one) into an error.
func rcErr(op string, rc int32) error {
	if rc < 0 {
		rc = -rc
	}
	return verbErr(op, syscall.Errno(rc))
}

// AttrError is an attribute this package refused before calling C, because
// the verb would fail on it (often with a bare EINVAL that names nothing) or,
// worse, succeed and leave a QP that never talks. It wraps EINVAL.
type AttrError struct {
	Op     string // the method, e.g. "QP.ToRTR"
	Field  string // the attribute, e.g. "MTU"
	Reason string
}

func (e *AttrError) Error() string { return "hand: " + e.Op + ": " + e.Field + ": " + e.Reason }

// Unwrap returns syscall.EINVAL.
func (e *AttrError) Unwrap() error { return syscall.EINVAL }

// BusyError is returned by Close on an object that other live objects
// depend on: a PD with MRs or QPs, a CQ that a QP uses, a Context with PDs.
// Nothing is closed; close the Children (named in the message) first. It
// matches syscall.EBUSY, which is what the kernel would have said, without
// saying which.
//
// This package never closes children implicitly: a child closed behind its
// owner's back (an MR under a buffer a peer still writes into, a QP a poller
// still reads) is a worse failure than an error at Close.
type BusyError struct {
	Object   string   // the object Close was called on, e.g. "PD 0x3"
	Children []string // what still depends on it, e.g. "MR lkey 0x104 (4096 bytes)"
}

func (e *BusyError) Error() string {
	return "hand: cannot close " + e.Object + ": still used by " + strings.Join(e.Children, ", ") + "; close them first"
}

// Is matches syscall.EBUSY.
func (e *BusyError) Is(target error) bool { return target == syscall.EBUSY }
