package hand

// #include "hand.h"
import "C"

import (
	"math"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/verbs"
)

// WC is a typed view of one completion (struct ibv_wc) in a poller's C
// memory. Its accessors keep the verbs contract: of a completion whose status
// is not success only WRID, Status, QPNum and VendorErr are meaningful, and
// the other accessors return their zero value (Opcode returns OpcodeUnknown).
type WC struct {
	wc verbs.WC
}

// OpcodeUnknown is what WC.Opcode returns for a failed completion, whose
// opcode the device leaves unspecified.
const OpcodeUnknown WCOpcode = 0xffffffff

// WRID is the wr_id of the WR that completed (for rdma_post_*v, its context).
func (w *WC) WRID() uint64 { return w.wc.WRID }

// Status is the completion status.
func (w *WC) Status() WCStatus { return w.wc.Status }

// OK reports whether the status is success.
func (w *WC) OK() bool { return w.wc.Status == verbs.WCSuccess }

// Err is nil on success, else a StatusError. It does not allocate.
func (w *WC) Err() error {
	if w.wc.Status == verbs.WCSuccess {
		return nil
	}
	return StatusError(w.wc.Status)
}

// StatusString is ibv_wc_status_str of the status.
func (w *WC) StatusString() string { return statusString(w.wc.Status) }

// QPNum is the local QP number of the WR.
func (w *WC) QPNum() uint32 { return w.wc.QPNum }

// VendorErr is the vendor error syndrome of a failed completion.
func (w *WC) VendorErr() uint32 { return w.wc.VendorErr }

// Opcode is the completion opcode, or OpcodeUnknown if the completion failed.
func (w *WC) Opcode() WCOpcode {
	if w.wc.Status != verbs.WCSuccess {
		return OpcodeUnknown
	}
	return w.wc.Opcode
}

// IsRecv reports a successful receive completion (opcode & IBV_WC_RECV).
func (w *WC) IsRecv() bool {
	return w.wc.Status == verbs.WCSuccess && w.wc.Opcode&verbs.WCRecv != 0
}

// ByteLen is the number of bytes transferred (for a UD receive, including
// the 40-byte GRH area); 0 if the completion failed.
func (w *WC) ByteLen() uint32 {
	if w.wc.Status != verbs.WCSuccess {
		return 0
	}
	return w.wc.ByteLen
}

// Flags are the IBV_WC_* flags; 0 if the completion failed.
func (w *WC) Flags() WCFlags {
	if w.wc.Status != verbs.WCSuccess {
		return 0
	}
	return w.wc.WCFlags
}

// HasGRH reports IBV_WC_GRH: the first 40 bytes of the receive buffer hold a GRH.
func (w *WC) HasGRH() bool { return w.Flags()&verbs.WCGRH != 0 }

// HasImm reports IBV_WC_WITH_IMM.
func (w *WC) HasImm() bool { return w.Flags()&verbs.WCWithImm != 0 }

// Imm is the immediate data in host byte order, and whether there is any.
func (w *WC) Imm() (uint32, bool) {
	if !w.HasImm() {
		return 0, false
	}
	return w.wc.ImmData.Native(), true
}

// InvalidatedRKey is the rkey a send with invalidate invalidated, and
// whether there is one (IBV_WC_WITH_INV).
func (w *WC) InvalidatedRKey() (uint32, bool) {
	if w.Flags()&verbs.WCWithInv == 0 {
		return 0, false
	}
	return *w.wc.InvalidatedRKey(), true
}

// SrcQP is the remote QP number of a UD receive; 0 if the completion failed.
func (w *WC) SrcQP() uint32 {
	if w.wc.Status != verbs.WCSuccess {
		return 0
	}
	return w.wc.SrcQP
}

// Raw is the completion as the provider wrote it (for the poller of
// ibv_poll_cq) or as the extended poller filled it, fields the status makes
// meaningless included.
func (w *WC) Raw() *verbs.WC { return &w.wc }

// StatusError is a failed completion's status as an error.
type StatusError WCStatus

func (e StatusError) Error() string { return "completion: " + statusString(WCStatus(e)) }

// statusStrings caches ibv_wc_status_str, so that printing a status does not
// cross into C or allocate.
var statusStrings = sync.OnceValue(func() []string {
	s := make([]string, verbs.WCTMRndvIncomplete+1)
	for i := range s {
		s[i] = C.GoString((*C.char)(unsafe.Pointer(verbs.WCStatusStr(verbs.WCStatus(i)))))
	}
	return s
})

func statusString(s verbs.WCStatus) string {
	if t := statusStrings(); int(s) < len(t) {
		return t[s]
	}
	return "unknown status " + strconv.FormatUint(uint64(s), 10)
}

// PollError is a failed poll: ibv_poll_cq returned a negative value, or
// ibv_start_poll or ibv_next_poll of the extended poll a value other than 0
// and ENOENT. A poller owns the one it returns and reuses it.
type PollError struct {
	Op  string // "ibv_poll_cq", "ibv_start_poll" or "ibv_next_poll"
	Ret int    // what the call returned, as the provider returned it
}

func (e *PollError) Error() string { return e.Op + " failed: " + strconv.Itoa(e.Ret) }

// Unwrap returns Ret as a syscall.Errno when an extended poll's call
// (ibv_start_poll, ibv_next_poll) returned a positive value, an errno, so
// that errors.Is(err, syscall.EBUSY) finds the transient EBUSY which
// ibv_create_cq_ex(3) says to retry (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK).
// A negative Ret unwraps to nothing: providers return codes of their own
// there (mlx5, mlx4 and hns CQ_POLL_ERR, -2, for a CQE they cannot parse,
// which as -ENOENT would read as an empty CQ), and the -errno of others
// (irdma's -EINVAL) cannot be told from them; compare Ret instead. Nor
// does ibv_poll_cq's negative return unwrap, which is no errno either.
func (e *PollError) Unwrap() error {
	if e.Ret > 0 && e.Op != "ibv_poll_cq" {
		return syscall.Errno(e.Ret)
	}
	return nil
}

// Poller reaps completions from a CQ with ibv_poll_cq into a C-allocated
// array of struct ibv_wc.
type Poller struct {
	use   inUse // taken by each Poll, PollSpin, wait and Close
	owner *CQ   // nil for NewPollerRaw
	cq    *verbs.CQ
	wc    []WC // C memory
	mem   unsafe.Pointer
	err   PollError
}

// NewPoller makes a poller that reaps up to n completions from cq per Poll.
// Poll returns ErrClosed once cq is closed. Close releases it.
func NewPoller(cq *CQ, n int) (*Poller, error) {
	if cq == nil {
		return nil, syscall.EINVAL
	}
	if err := cq.use(); err != nil {
		return nil, err
	}
	defer cq.done()
	p, err := NewPollerRaw(cq.raw, n)
	if err != nil {
		return nil, err
	}
	p.owner = cq
	return p, nil
}

// NewPollerRaw makes a poller that reaps up to n completions from cq per
// Poll. cq must be C memory (from ibv_create_cq): Poll passes it to C as a plain
// address, so that cgo does not check it for Go pointers at every call.
// n must be 1 to math.MaxInt32 (C's int counts completions), else it
// returns EINVAL. Close releases it.
func NewPollerRaw(cq *verbs.CQ, n int) (*Poller, error) {
	size, ok := pollerBytes(n, unsafe.Sizeof(WC{}), 0)
	if cq == nil || !ok {
		return nil, syscall.EINVAL
	}
	mem, err := cmalloc(size)
	if err != nil {
		return nil, err
	}
	return &Poller{cq: cq, wc: unsafe.Slice((*WC)(mem), n), mem: mem}, nil
}

// pollerBytes is the size of a poller's C memory: n entries of each bytes,
// then extra. It is false when n is below 1, above what C's int holds, or
// makes the size overflow (2^61 WCs are 0 bytes mod 2^64).
func pollerBytes(n int, each, extra uintptr) (uintptr, bool) {
	if n <= 0 || n > math.MaxInt32 || uintptr(n) > (^uintptr(0)-extra)/each {
		return 0, false
	}
	return uintptr(n)*each + extra, true
}

// Close releases the poller's C memory, and with it the last Poll's
// completions. Closing again does nothing. Close returns nil, or an error
// matching ErrConcurrentUse, having released nothing, when another
// goroutine is in a call of the poller (a Wait included).
func (p *Poller) Close() error {
	if !p.use.enter() {
		return usedPollerClose
	}
	if p.mem != nil {
		cfree(p.mem)
	}
	p.owner, p.cq, p.wc, p.mem, p.err = nil, nil, nil, nil, PollError{}
	p.use.exit()
	return nil
}

// Poll reaps up to n completions with one ibv_poll_cq call. The returned
// slice aliases the Poller's C-allocated buffer and is valid until the next
// Poll or Close; it is empty when the CQ is. On failure it returns a
// *PollError, owned by the poller. Poll does not allocate. An empty poll
// of a CQ that overran returns the CQ's *OverrunError (see CQ); a
// NewPollerRaw poller cannot know of an overrun.
//
// A poller is for one goroutine at a time: a call (Poll, PollSpin, a
// wait, Close) that finds another goroutine in a call of the poller
// reaps nothing and returns an error matching ErrConcurrentUse.
func (p *Poller) Poll() ([]WC, error) {
	return p.poll(0, 1, usedPoll)
}

// PollSpin is Poll repeated up to polls times inside one cgo call: it
// returns the completions of the first ibv_poll_cq that finds any, or its
// failure, or an empty slice when all polls found the CQ empty. A loop
// that busy-polls with Poll crosses into C once per empty poll, which costs
// Go several times what the empty poll costs C; PollSpin crosses once per
// polls of them. The goroutine cannot be preempted while it spins (it is in
// C), so keep polls to what a few microseconds hold: tens, not thousands.
// polls below 1 is an *AttrError. PollSpin does not allocate.
func (p *Poller) PollSpin(polls int) ([]WC, error) {
	if polls < 1 {
		return nil, &AttrError{Op: "Poller.PollSpin", Field: "polls", Reason: strconv.Itoa(polls) + ": must be at least 1"}
	}
	// C's int counts them: more than it holds would wrap (2^32 to 0).
	return p.poll(0, min(polls, math.MaxInt32), usedPollSpin)
}

// poll reaps into the poller's completions from the from'th on (0 but for
// a WaitThreadAtLeast's queued way, which keeps those before from), with
// up to polls ibv_poll_cq in one cgo call, and returns those it reaped.
// It takes p.use for the call, returning used when another goroutine holds
// it; a wait, which holds it from start to end, passes nil. (One function
// for both, rather than a wrapper taking p.use around it: Poll then stays
// small enough to be inlined, and a poll one call.)
func (p *Poller) poll(from, polls int, used *usedError) ([]WC, error) {
	if used != nil && !p.use.enter() {
		return nil, used
	}
	if p.mem == nil {
		return p.ret(nil, ErrClosed, used)
	}
	if p.owner != nil {
		if err := p.owner.use(); err != nil {
			return p.ret(nil, err, used)
		}
	}
	wc := p.wc[from:]
	var r int32
	if polls == 1 {
		r = int32(C.goverbs_poll_cq(cptr(unsafe.Pointer(p.cq)), C.int(len(wc)),
			cptr(unsafe.Pointer(&wc[0]))))
	} else {
		r = int32(C.goverbs_poll_cq_spin(cptr(unsafe.Pointer(p.cq)), C.int(len(wc)),
			cptr(unsafe.Pointer(&wc[0])), C.int(polls)))
	}
	// Released here rather than deferred, as in the posts: nothing
	// between use and done panics (wc is never empty: from is below
	// p.wc's length; and C does not return by panicking), and a defer's wrapper costs about 16
	// instructions a call on the data path (make perf-insns).
	if p.owner != nil {
		p.owner.done()
	}
	if r < 0 {
		p.err = PollError{Op: "ibv_poll_cq", Ret: int(r)}
		return p.ret(nil, &p.err, used)
	}
	// An empty poll of a CQ that overran says so (see CQ); only an empty
	// one, so that the check costs the polls that reap nothing.
	if r == 0 && p.owner != nil {
		if err := p.owner.overrunErr(); err != nil {
			return p.ret(nil, err, used)
		}
	}
	return p.ret(wc[:r], nil, used)
}

// armPoll is RequestNotify(false) and then poll(0, 1, nil), in one cgo call
// (goverbs_arm_poll_cq): Wait's step before it parks, one crossing where the
// two cost two. p.use is held, as by a wait.
func (p *Poller) armPoll() ([]WC, error) {
	if p.mem == nil {
		return nil, ErrClosed
	}
	cq := p.owner
	if err := cq.use(); err != nil {
		return nil, err
	}
	// Set before the arm, as RequestNotify does.
	cq.armed.Store(true)
	r := int32(C.goverbs_arm_poll_cq(cptr(unsafe.Pointer(p.cq)), C.int(len(p.wc)),
		cptr(unsafe.Pointer(&p.wc[0]))))
	cq.done() // not deferred: see poll
	switch {
	case r <= C.GOVERBS_ARM_POLL_FAILED:
		cq.armed.Store(false)
		return nil, siteReqNotifyCq.Err(syscall.Errno(C.GOVERBS_ARM_POLL_FAILED - r))
	case r < 0:
		p.err = PollError{Op: "ibv_poll_cq", Ret: int(r)}
		return nil, &p.err
	case r == 0:
		if err := cq.overrunErr(); err != nil {
			return nil, err
		}
	}
	return p.wc[:r], nil
}

// ret returns wcs and err, giving p.use back first when poll took it
// (used is not nil).
func (p *Poller) ret(wcs []WC, err error, used *usedError) ([]WC, error) {
	if used != nil {
		p.use.exit()
	}
	return wcs, err
}

// anyFailed reports whether one of wcs failed, which ends a
// WaitThreadAtLeast before min (as any_failed does in its C loop).
func anyFailed(wcs []WC) bool {
	for i := range wcs {
		if !wcs[i].OK() {
			return true
		}
	}
	return false
}

// ExPoller reaps completions from an extended CQ (struct ibv_cq_ex) with
// ibv_start_poll, ibv_next_poll and ibv_end_poll, all in one cgo call, into
// the same WC views as Poller.
type ExPoller struct {
	use   inUse // taken by each Poll, PollSpin and Close
	owner *CQ   // nil for NewExPollerRaw
	cq    *verbs.CQEx
	wc    []WC     // C memory
	ts    []uint64 // C memory: completion timestamps
	flags verbs.CreateCQWCFlags
	fail  *C.int // C memory: goverbs_poll_ex's failure slot
	mem   unsafe.Pointer
	err   PollError
}

// NewExPoller makes a poller that reaps up to n completions from cq, an
// extended CQ (CQOptions.Extended), per Poll, reading the fields its
// CQOptions.WCFlags selected. Poll returns ErrClosed once cq is closed.
func NewExPoller(cq *CQ, n int) (*ExPoller, error) {
	if cq == nil {
		return nil, syscall.EINVAL
	}
	if err := cq.use(); err != nil {
		return nil, err
	}
	defer cq.done()
	if cq.rawEx == nil {
		return nil, &AttrError{Op: "NewExPoller", Field: "cq", Reason: "is not extended: make it with CQOptions.Extended, or use NewPoller"}
	}
	p, err := NewExPollerRaw(cq.rawEx, n, cq.wcFlags)
	if err != nil {
		return nil, err
	}
	p.owner = cq
	return p, nil
}

// NewExPollerRaw makes a poller that reaps up to n completions from cq per
// Poll, reading the fields wcFlags selects: pass the wc_flags the CQ was
// created with (ibv_create_cq_ex), since a provider may not implement the
// readers of fields it was not asked for. The opcode, wc_flags and, on an
// error, vendor_err are always read. cq must be C memory, and n as for
// NewPollerRaw. Close releases it.
func NewExPollerRaw(cq *verbs.CQEx, n int, wcFlags CQWCFlags) (*ExPoller, error) {
	// each completion's WC and timestamp, then the failure slot
	size, ok := pollerBytes(n, unsafe.Sizeof(WC{})+8, 8)
	if cq == nil || !ok {
		return nil, syscall.EINVAL
	}
	wcSize := uintptr(n) * unsafe.Sizeof(WC{})
	tsSize := uintptr(n) * 8
	mem, err := cmalloc(size)
	if err != nil {
		return nil, err
	}
	return &ExPoller{
		cq:    cq,
		wc:    unsafe.Slice((*WC)(mem), n),
		ts:    unsafe.Slice((*uint64)(unsafe.Add(mem, wcSize)), n),
		fail:  (*C.int)(unsafe.Add(mem, wcSize+tsSize)),
		flags: wcFlags,
		mem:   mem,
	}, nil
}

// Close releases the poller's C memory, and with it the last Poll's
// completions. Closing again does nothing. Close returns nil, or an error
// matching ErrConcurrentUse, having released nothing, when another
// goroutine is in a call of the poller.
func (p *ExPoller) Close() error {
	if !p.use.enter() {
		return usedExPollClose
	}
	if p.mem != nil {
		cfree(p.mem)
	}
	p.owner, p.cq, p.wc, p.ts, p.flags, p.fail, p.mem, p.err = nil, nil, nil, nil, 0, nil, nil, PollError{}
	p.use.exit()
	return nil
}

// Poll reaps up to n completions in one cgo call. The slice aliases the
// ExPoller's C-allocated buffer and is valid until the next Poll or Close; it
// is empty when the CQ is. Fields wcFlags did not select are zero (without
// WCExWithImm, the IBV_WC_WITH_IMM and IBV_WC_WITH_INV flags are cleared
// too, so that Imm answers false), and so is everything but WRID, Status,
// VendorErr and QPNum of a failed completion.
//
// It returns completions or an error, never both: when ibv_start_poll
// fails, no completion and a *PollError, owned by the poller, with what
// the provider returned. When ibv_next_poll fails, it returns the
// completions read before it, and the next Poll or PollSpin returns its
// *PollError without polling; the completion that failed is lost where the
// provider consumed it (mlx5, mlx4 and hns do). Poll does not allocate.
//
// An ExPoller is for one goroutine at a time, as a Poller is: a call that
// finds another goroutine in a call of it reaps nothing and returns an
// error matching ErrConcurrentUse.
func (p *ExPoller) Poll() ([]WC, error) {
	return p.poll(1, usedExPoll)
}

// PollSpin is Poll repeated up to polls times inside one cgo call, as
// Poller.PollSpin is: it returns at the first poll that reaps completions or
// fails, or empty after polls empty ones; an ibv_next_poll failure is
// reported as by Poll. polls below 1 is an *AttrError. PollSpin does not
// allocate.
func (p *ExPoller) PollSpin(polls int) ([]WC, error) {
	if polls < 1 {
		return nil, &AttrError{Op: "ExPoller.PollSpin", Field: "polls", Reason: strconv.Itoa(polls) + ": must be at least 1"}
	}
	// C's int counts them, as for Poller.PollSpin.
	return p.poll(min(polls, math.MaxInt32), usedExPollSpin)
}

// poll is Poll with up to polls polls, in p.use: it returns used when
// another goroutine holds it.
func (p *ExPoller) poll(polls int, used *usedError) ([]WC, error) {
	if !p.use.enter() {
		return nil, used
	}
	if p.mem == nil {
		p.use.exit()
		return nil, ErrClosed
	}
	if p.owner != nil {
		if err := p.owner.use(); err != nil {
			p.use.exit()
			return nil, err
		}
	}
	if *p.fail != 0 {
		// next_poll's, kept while the last call returned the completions before it
		if p.owner != nil {
			p.owner.done()
		}
		p.err = PollError{Op: "ibv_next_poll", Ret: int(*p.fail)}
		*p.fail = 0
		p.use.exit()
		return nil, &p.err
	}
	cq, wc, ts, fail := cptr(unsafe.Pointer(p.cq)), cptr(unsafe.Pointer(&p.wc[0])),
		cptr(unsafe.Pointer(&p.ts[0])), cptr(unsafe.Pointer(p.fail))
	var r C.int
	if polls == 1 {
		r = C.goverbs_poll_ex(cq, wc, ts, C.int(len(p.wc)), C.uint64_t(p.flags), fail)
	} else {
		r = C.goverbs_poll_ex_spin(cq, wc, ts, C.int(len(p.wc)), C.uint64_t(p.flags), fail, C.int(polls))
	}
	// Released in line, as Poller.poll does: nothing since use panics.
	if p.owner != nil {
		p.owner.done()
	}
	if r < 0 { // GOVERBS_POLL_FAILED: start_poll's value is in *p.fail
		p.err = PollError{Op: "ibv_start_poll", Ret: int(*p.fail)}
		*p.fail = 0
		p.use.exit()
		return nil, &p.err
	}
	if r == 0 && p.owner != nil { // as Poller.poll
		if err := p.owner.overrunErr(); err != nil {
			p.use.exit()
			return nil, err
		}
	}
	p.use.exit()
	return p.wc[:r], nil
}

// pollExReader is goverbs_poll_ex's address, for the C side of the
// poll_cq_ex benchmark, which calls the very loop Poll does (export_test.go).
func pollExReader() unsafe.Pointer { return unsafe.Pointer(C.goverbs_poll_ex) }

// Timestamp is the completion timestamp (ibv_wc_read_completion_ts) of
// completion i of the last Poll, when the poller's wcFlags hold
// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP; 0 otherwise or for a failed completion.
func (p *ExPoller) Timestamp(i int) uint64 {
	if p.flags&verbs.WCExWithCompletionTimestamp == 0 {
		return 0
	}
	return p.ts[i]
}
