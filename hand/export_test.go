package hand

import (
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// PollExReader is goverbs_poll_ex, the C loop ExPoller.Poll crosses into,
// for cbench.PollEx: the benchmark's C side then runs the same code.
func PollExReader() unsafe.Pointer { return pollExReader() }

// Buffers are the poller's C arrays of completions and timestamps, and its
// failure slot.
func (p *ExPoller) Buffers() (wc, ts, fail unsafe.Pointer) {
	return unsafe.Pointer(&p.wc[0]), unsafe.Pointer(&p.ts[0]), unsafe.Pointer(p.fail)
}

// ConnOnID is a Conn on id alone, for the rdma_post_*v methods on a fake
// provider's rdma_cm id (a real Conn needs the kernel's rdma_cm): they use
// nothing of a Conn but its id and its open state.
func ConnOnID(id *rdmacm.CMID) *Conn { return &Conn{id: id} }

// AHOn is an AH on raw alone, for SetUD on a fake provider's address
// handle.
func AHOn(raw *verbs.AH) *AH { return &AH{raw: raw, live: raw} }

// Closed marks ah closed, as Close does after ibv_destroy_ah.
func (ah *AH) Closed() { ah.live = nil }

// MWOn is an MW of type typ on raw alone (C memory the test made), for
// SetBindMW without a device.
func MWOn(raw *verbs.MW, typ MWType) *MW {
	mw := &MW{raw: raw, typ: typ}
	mw.rkey.Store(raw.RKey)
	return mw
}

// MROn is an MR on raw alone, of length bytes at addr, for SetBindMW
// without a device.
func MROn(raw *verbs.MR, addr uint64, length int) *MR {
	return &MR{raw: raw, addr: addr, length: length}
}

// MarkClosed marks mw closed, as Close does.
func (mw *MW) MarkClosed() { mw.closed = true }

// QPOn is a QP on raw alone, for the post methods on a fake provider's QP:
// they use nothing of a QP but its raw pointer and its open state.
func QPOn(raw *verbs.QP) *QP { return &QP{raw: raw} }

// SRQOn is an SRQ on raw alone, as QPOn.
func SRQOn(raw *verbs.SRQ) *SRQ { return &SRQ{raw: raw} }
