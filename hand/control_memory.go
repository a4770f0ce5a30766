package hand

import (
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
	"github.com/goverbs/goverbs/verberr"
)

// PD is a protection domain (struct ibv_pd): the parent of MRs, QPs, SRQs,
// AHs and MWs.
type PD struct {
	object
	ctx *Context
	raw *verbs.PD
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	if err := c.use(); err != nil {
		return nil, err
	}
	defer c.done()
	raw, err := verbs.AllocPD(c.raw)
	if err != nil {
		return nil, err
	}
	pd := &PD{ctx: c, raw: raw}
	pd.init(fmt.Sprintf("PD %#x", raw.Handle), &c.object)
	return pd, nil
}

// Raw returns the struct ibv_pd, valid until Close.
func (pd *PD) Raw() *verbs.PD { return pd.raw }

// Context returns the device the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Close deallocates the PD. It fails with a *BusyError naming them while
// MRs, QPs, SRQs, AHs or MWs made from it are open.
func (pd *PD) Close() error {
	return pd.close(func() error { return verbs.DeallocPD(pd.raw) }, nil, nil)
}

// Access is a set of memory access rights (enum ibv_access_flags) for MRs,
// MWs and QPs.
type Access uint32

const (
	AccessLocalWrite   = Access(verbs.AccessLocalWrite)
	AccessRemoteWrite  = Access(verbs.AccessRemoteWrite)
	AccessRemoteRead   = Access(verbs.AccessRemoteRead)
	AccessRemoteAtomic = Access(verbs.AccessRemoteAtomic)
	AccessMWBind       = Access(verbs.AccessMWBind)
	AccessZeroBased    = Access(verbs.AccessZeroBased)
	// AccessOnDemand asks for on-demand paging: pages are faulted in when
	// the device touches them instead of pinned at registration. The
	// registration fails with ErrNotSupported when the device has no ODP.
	AccessOnDemand        = Access(verbs.AccessOnDemand)
	AccessRelaxedOrdering = Access(verbs.AccessRelaxedOrdering)

	remoteWriteNeedsLocal = AccessRemoteWrite | AccessRemoteAtomic
)

// MR is a registered memory region (struct ibv_mr).
//
// Its memory is outside the Go heap: either mapped by Alloc (and unmapped by
// Close, after deregistration) or provided by the caller to Register (and
// left to the caller). Go memory must never be registered: the garbage
// collector may move or free it while the device reads or writes it, and
// nothing (not even cgocheck) can see an address stored in a work request.
type MR struct {
	object
	pd         *PD
	raw        *verbs.MR
	buf        []byte // the registered bytes; nil for a dmabuf MR
	owned      bool   // buf was mapped by Alloc
	addr       uint64 // copies of raw's fields, readable after Close
	length     int
	lkey, rkey uint32
}

// Alloc maps length bytes of anonymous, page-aligned memory outside the Go
// heap (mmap) and registers them with access. Close deregisters and unmaps.
// Bytes returns the memory.
func (pd *PD) Alloc(length int, access Access) (*MR, error) {
	if length <= 0 {
		return nil, &AttrError{Op: "PD.Alloc", Field: "length", Reason: fmt.Sprintf("%d: must be positive", length)}
	}
	buf, err := syscall.Mmap(-1, 0, length, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("goverbs: mmap(%d bytes): %w", length, err)
	}
	mr, err := pd.register(buf, access, true)
	if err != nil {
		syscall.Munmap(buf)
		return nil, err
	}
	return mr, nil
}

// Register registers caller-provided memory that is not Go memory: from
// syscall.Mmap, C.malloc, a hugetlbfs mapping, a shared-memory segment. The
// caller keeps the memory mapped until Close returns. mem must not come
// from the Go heap (a make, a new, a Go variable): see MR.
func (pd *PD) Register(mem []byte, access Access) (*MR, error) {
	if len(mem) == 0 {
		return nil, &AttrError{Op: "PD.Register", Field: "mem", Reason: "empty"}
	}
	return pd.register(mem, access, false)
}

func (pd *PD) register(buf []byte, access Access, owned bool) (*MR, error) {
	if access&remoteWriteNeedsLocal != 0 && access&AccessLocalWrite == 0 {
		// The kernel refuses this with a bare EINVAL.
		return nil, &AttrError{Op: "PD.Register", Field: "access", Reason: "remote write or atomic access requires AccessLocalWrite"}
	}
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	if access&AccessOnDemand != 0 {
		if err := pd.ctx.checkODP(); err != nil {
			return nil, err
		}
	}
	raw, err := verbs.RegMR(pd.raw, unsafe.Pointer(unsafe.SliceData(buf)), uint64(len(buf)), verbs.AccessFlags(access))
	if err != nil {
		// ENOMEM and EPERM are also what pinning past RLIMIT_MEMLOCK
		// reports: say so, and how to raise it, after the stub's error.
		var ve *VerbError
		if errors.As(err, &ve) && (ve.Errno() == syscall.ENOMEM || ve.Errno() == syscall.EPERM) {
			if hint := memlockHint(len(buf)); hint != "" {
				return nil, fmt.Errorf("%w; %s", err, hint)
			}
		}
		return nil, err
	}
	mr := newMR(pd, raw)
	mr.buf, mr.owned = buf, owned
	return mr, nil
}

// RegisterDmabuf registers length bytes at offset of a dma-buf (a GPU or
// other device's memory exported as a file descriptor), with iova the
// address work requests use for its first byte (ibv_reg_dmabuf_mr). The
// caller keeps fd open until Close. Providers without dma-buf support
// (soft-RoCE among them) fail with ErrNotSupported.
func (pd *PD) RegisterDmabuf(fd int, offset, length, iova uint64, access Access) (*MR, error) {
	if err := checkRange("PD.RegisterDmabuf", "fd", fd, 0, math.MaxInt32); err != nil {
		return nil, err
	}
	if err := pd.use(); err != nil {
		return nil, err
	}
	defer pd.done()
	raw, err := verbs.RegDmabufMR(pd.raw, offset, length, iova, int32(fd), verbs.AccessFlags(access))
	if err != nil {
		return nil, err
	}
	return newMR(pd, raw), nil
}

func newMR(pd *PD, raw *verbs.MR) *MR {
	mr := &MR{pd: pd, raw: raw, addr: uint64(uintptr(raw.Addr)), length: int(raw.Length), lkey: raw.LKey, rkey: raw.RKey}
	mr.init(fmt.Sprintf("MR lkey %#x (%d bytes)", mr.lkey, mr.length), &pd.object)
	return mr
}

// Raw returns the struct ibv_mr, valid until Close.
func (mr *MR) Raw() *verbs.MR { return mr.raw }

// PD returns the protection domain the MR was registered in.
func (mr *MR) PD() *PD { return mr.pd }

// Bytes returns the registered memory (nil for a dma-buf MR, and after
// Close). It is valid until Close: an Alloc MR's Close unmaps it, and
// touching a slice kept from before then faults.
func (mr *MR) Bytes() []byte {
	if mr.isClosed() {
		return nil
	}
	return mr.buf
}

// Addr returns the address of the first byte, as work requests and peers
// (for RDMA read and write) use it.
func (mr *MR) Addr() uint64 { return mr.addr }

// Len returns the registered length in bytes.
func (mr *MR) Len() int { return mr.length }

// LKey returns the local key, for scatter/gather entries.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey returns the remote key, for a peer's RDMA read and write.
func (mr *MR) RKey() uint32 { return mr.rkey }

// SGE returns a scatter/gather entry for length bytes at offset. It
// panics on a negative offset or length, or a length an SGE's 32 bits
// cannot hold, which would silently become a shorter transfer. Bounds
// within the MR are the device's to check (a local protection error).
func (mr *MR) SGE(offset, length int) SGE {
	if offset < 0 || uint(length) > math.MaxUint32 { // a negative length too
		panic(errBadSGE) // a value made once: SGE stays within the inliner's budget
	}
	return verbs.SGE{Addr: mr.addr + uint64(offset), Length: uint32(length), LKey: mr.lkey}
}

var errBadSGE = errors.New("goverbs: MR.SGE: a negative offset or length, or a length over an SGE's 32 bits")

// Close deregisters the MR and, for an Alloc MR, unmaps its memory. Make
// sure no work request still refers to it: once Close returns, the memory
// is gone.
func (mr *MR) Close() error {
	return mr.close(func() error {
		if err := verbs.DeregMR(mr.raw); err != nil {
			return err
		}
		if mr.owned {
			syscall.Munmap(mr.buf)
		}
		return nil
	}, nil, nil)
}

// checkODP fails with ErrNotSupported unless the device does on-demand
// paging. The caller holds c.
func (c *Context) checkODP() error {
	var a verbs.DeviceAttrEx
	if err := verbs.QueryDeviceEx(c.raw, nil, &a); err != nil {
		return err
	}
	if a.ODPCaps.GeneralCaps&uint64(verbs.ODPSupport) == 0 {
		return &notSupportedError{fmt.Sprintf("goverbs: %s has no on-demand paging (odp_caps.general_caps %#x)", c.name, a.ODPCaps.GeneralCaps)}
	}
	return nil
}

// MemlockLimit returns the soft and hard RLIMIT_MEMLOCK of this process, in
// bytes (RLIM_INFINITY is ^uint64(0)). Registration pins pages and counts
// them against the soft limit, unless the process has CAP_IPC_LOCK.
func MemlockLimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(rlimitMemlock, &r); err != nil {
		return 0, 0, rlimitErr(siteGetrlimit, err)
	}
	return r.Cur, r.Max, nil
}

// RaiseMemlockLimit raises the soft RLIMIT_MEMLOCK to the hard limit, which
// a process may do without privilege, and returns the new soft limit.
func RaiseMemlockLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(rlimitMemlock, &r); err != nil {
		return 0, rlimitErr(siteGetrlimit, err)
	}
	if r.Cur != r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(rlimitMemlock, &r); err != nil {
			return 0, rlimitErr(siteSetrlimit, err)
		}
	}
	return r.Cur, nil
}

// rlimitErr names the call that failed and the limit: a bare errno
// ("operation not permitted") would not say which.
func rlimitErr(site *verberr.Site, err error) error {
	if errno, ok := err.(syscall.Errno); ok {
		err = site.Err(errno)
	}
	return fmt.Errorf("RLIMIT_MEMLOCK: %w", err)
}

// memlockHint says how to raise RLIMIT_MEMLOCK when a registration of
// length bytes failed with ENOMEM or EPERM, which is what pinning past the
// limit reports.
func memlockHint(length int) string {
	soft, hard, err := MemlockLimit()
	if err != nil {
		return ""
	}
	return memlockAdvice(length, soft, hard, os.Geteuid() == 0)
}

func memlockAdvice(length int, soft, hard uint64, root bool) string {
	const inf = ^uint64(0)
	if soft == inf {
		return "" // not the limit: really out of memory, or the device's own limit
	}
	s := fmt.Sprintf("registering %d bytes pins them, and RLIMIT_MEMLOCK allows %s in all (hard limit %s): ",
		length, limitString(soft), limitString(hard))
	switch {
	case hard > soft:
		s += "call hand.RaiseMemlockLimit() or run `ulimit -l " + limitArg(hard) + "` first; "
	case root:
		s += "run `ulimit -l unlimited` first; "
	}
	return s + "to raise the hard limit set `* - memlock unlimited` in /etc/security/limits.conf, " +
		"LimitMEMLOCK=infinity in the systemd unit, or --ulimit memlock=-1 for docker, or grant CAP_IPC_LOCK"
}

func limitString(v uint64) string {
	if v == ^uint64(0) {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", v/1024)
}

func limitArg(v uint64) string {
	if v == ^uint64(0) {
		return "unlimited"
	}
	return fmt.Sprint(v / 1024)
}

// rlimitMemlock is RLIMIT_MEMLOCK, which package syscall does not name.
const rlimitMemlock = 8
