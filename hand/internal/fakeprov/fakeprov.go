// Package fakeprov is a verbs provider with no device behind it, for the unit
// tests and benchmarks of hand/.
//
// It builds, in C memory, a struct ibv_context whose ops.post_send,
// ops.post_recv, ops.post_srq_recv and ops.poll_cq are the functions of
// fakeprov.c, and QPs, SRQs, CQs (usable as struct ibv_cq and struct
// ibv_cq_ex), AHs and rdma_cm_ids that point at it. Callers cast the
// unsafe.Pointers it hands out to the generated types, and the real static
// inline dispatch of verbs.h and rdma_verbs.h runs unchanged.
//
// Every posted WR is checked like a hardware provider checks it, written as a
// 64-byte WQE with big-endian fields into a ring, and each post call writes a
// doorbell record. In Loopback mode every WR (every signaled WR on a send
// queue) also becomes a completion in its CQ at once.
//
// It does not model the wire: no data moves between QPs, and a CQ overrun only
// sets a flag. A Provider and its objects are used by one goroutine at a time,
// but for Hold, Held and Release, which another goroutine calls while a call
// is held.
package fakeprov

/*
#include <stdlib.h>
#include "fakeprov.h"
*/
import "C"

import (
	"errors"
	"syscall"
	"unsafe"
)

// Mode says what a posted WR does besides writing its WQE.
type Mode int

const (
	// Loopback completes each WR at once: a CQE is written, and the WQ slot
	// is released when it is polled.
	Loopback Mode = C.FAKE_LOOPBACK
	// Sink writes no CQE and releases the WQ slot at once, so posting never
	// runs out of room (for benchmarks of the post paths).
	Sink Mode = C.FAKE_SINK
)

// QP types, as enum ibv_qp_type.
const (
	RC = C.IBV_QPT_RC
	UC = C.IBV_QPT_UC
	UD = C.IBV_QPT_UD
)

// WQEBytes is the size of a WQE basic block, CQEBytes the size of a CQE.
const (
	WQEBytes = C.FAKE_WQE_BB
	CQEBytes = C.FAKE_CQE_SIZE
)

// Junk is what error completions carry where a device leaves the value
// unspecified (opcode, byte_len, imm_data, src_qp).
const Junk = 0xdeadbeef

var errAlloc = errors.New("fakeprov: out of memory or object table full")

// Provider is a fake device context.
type Provider struct {
	c *C.struct_fake_ctx
}

// New makes a provider. Close frees it and everything made from it.
func New() (*Provider, error) {
	c := C.fake_ctx_new()
	if c == nil {
		return nil, errAlloc
	}
	return &Provider{c: c}, nil
}

// Close frees the provider and every object made from it.
func (p *Provider) Close() {
	C.fake_ctx_free(p.c)
	p.c = nil
}

// Context returns the struct ibv_context *.
func (p *Provider) Context() unsafe.Pointer { return unsafe.Pointer(&p.c.ctx) }

// CQ is a fake completion queue.
type CQ struct {
	c *C.struct_fake_cq
}

// NewCQ makes a CQ with room for at least entries completions (rounded up to
// a power of two).
func (p *Provider) NewCQ(entries int) (*CQ, error) {
	if entries <= 0 {
		return nil, syscall.EINVAL
	}
	c := C.fake_cq_new(p.c, C.uint32_t(entries))
	if c == nil {
		return nil, errAlloc
	}
	return &CQ{c: c}, nil
}

// Ptr returns the struct ibv_cq *.
func (cq *CQ) Ptr() unsafe.Pointer { return unsafe.Pointer(&cq.c.ibcq) }

// ExPtr returns the struct ibv_cq_ex * (the same object: ibv_cq_ex_to_cq is a cast).
func (cq *CQ) ExPtr() unsafe.Pointer { return unsafe.Pointer(&cq.c.ibcq) }

// Capacity is the number of CQEs the ring holds.
func (cq *CQ) Capacity() int { return int(cq.c.cqe_cnt) }

// Pending is the number of completions not yet polled.
func (cq *CQ) Pending() int { return int(C.fake_cq_pending(cq.c)) }

// InjectStatus makes the next n completions written to this CQ carry status
// (an enum ibv_wc_status value) and vendorErr. Their opcode, byte_len,
// imm_data and src_qp carry Junk.
func (cq *CQ) InjectStatus(n int, status int, vendorErr uint32) {
	cq.c.inject_n = C.uint32_t(n)
	cq.c.inject_status = C.int(status)
	cq.c.inject_vendor_err = C.uint32_t(vendorErr)
}

// Overrun reports whether a completion arrived while the CQ was full and was
// dropped (a device raises IBV_EVENT_CQ_ERR then).
func (cq *CQ) Overrun() bool { return cq.c.overrun != 0 }

// ClearOverrun resets the overrun flag.
func (cq *CQ) ClearOverrun() { cq.c.overrun = 0 }

// SetEndless makes polling cycle through the completions pending now without
// consuming them, so a poll benchmark never runs dry; off ends it.
func (cq *CQ) SetEndless(on bool) error {
	if !on {
		if cq.c.endless != 0 {
			// leave the ring as if the cycle ended here: empty
			cq.c.ci = cq.c.pi
		}
		cq.c.endless = 0
		return nil
	}
	n := cq.Pending()
	if n == 0 {
		return syscall.EINVAL
	}
	cq.c.endless = C.uint32_t(n)
	return nil
}

// Hold makes the next post or poll call (ibv_post_send, ibv_post_recv,
// ibv_post_srq_recv, ibv_poll_cq, ibv_start_poll) of any of the provider's
// objects stop as it starts, until Release; calls that start meanwhile go
// on. It is for tests that need a call to be inside the provider while
// they do something else: Held reports when one is.
func (p *Provider) Hold() { C.fake_hold_set(p.c, C.FAKE_HOLD_ARMED) }

// Held reports whether a call is stopped by Hold.
func (p *Provider) Held() bool { return C.fake_hold_get(p.c) == C.FAKE_HOLD_HOLDING }

// Release lets the held call go on, and disarms a Hold no call met.
func (p *Provider) Release() { C.fake_hold_set(p.c, C.FAKE_HOLD_OFF) }

// HoldPolls makes the next k polls (ibv_poll_cq or ibv_start_poll calls)
// find the CQ empty whatever it holds, as a device's CQ is until its
// completions land.
func (cq *CQ) HoldPolls(k int) { cq.c.empty_polls = C.uint32_t(k) }

// FailPoll makes the next poll that is not held fail: ibv_poll_cq returns
// ret, a negative value, and ibv_start_poll -ret, as a provider does on a
// CQ it cannot read.
func (cq *CQ) FailPoll(ret int) { cq.c.poll_fail = C.int(ret) }

// FailNotify makes the next ibv_req_notify_cq on this CQ return errno (as
// providers do: a positive errno). Otherwise it succeeds, arming nothing:
// the fake raises no completion events.
func (cq *CQ) FailNotify(errno syscall.Errno) { cq.c.notify_fail = C.int(errno) }

// FailStartPollRaw makes the next ibv_start_poll that is not held return
// ret as is, consuming nothing: a positive errno (EBUSY, as mlx5 returns
// while its clock information is being updated) or a provider's negative
// code (mlx5's CQ_POLL_ERR, -2; irdma's -EINVAL).
func (cq *CQ) FailStartPollRaw(ret int) { cq.c.start_poll_ret = C.int(ret) }

// FailNextPollRaw makes the next ibv_next_poll consume its completion and
// return ret as is, as mlx5 does with a CQE it cannot parse: that
// completion is lost. With none to consume it returns ENOENT, and ret
// is spent.
func (cq *CQ) FailNextPollRaw(ret int) { cq.c.next_poll_ret = C.int(ret) }

// CQStats counts a CQ's completions.
type CQStats struct {
	Produced uint64 // CQEs written
	Polled   uint64 // CQEs reaped (by poll_cq or the extended ops)
	Dropped  uint64 // CQEs lost to an overrun
	Polls    uint64 // ibv_poll_cq and ibv_start_poll calls
	// Doorbell is the consumer index in the CQ's doorbell record (host order).
	Doorbell uint32
}

// Stats returns the CQ's counters.
func (cq *CQ) Stats() CQStats {
	return CQStats{
		Produced: uint64(cq.c.produced),
		Polled:   uint64(cq.c.polled),
		Dropped:  uint64(cq.c.dropped),
		Polls:    uint64(cq.c.poll_calls),
		Doorbell: be32(uint32(cq.c.dbrec)),
	}
}

// QPAttr describes a fake QP.
type QPAttr struct {
	Type           int // RC (the default when 0), UC or UD
	SendCQ, RecvCQ *CQ
	SRQ            *SRQ // when set the QP has no receive queue of its own
	MaxSendWR      int  // in 64-byte basic blocks; rounded up to a power of two
	MaxRecvWR      int
	MaxSendSGE     int
	MaxRecvSGE     int
	MaxInline      int
	SigAll         bool // every send WR is signaled
}

// QP is a fake queue pair.
type QP struct {
	c *C.struct_fake_qp
}

// NewQP makes a QP in the RTS state.
func (p *Provider) NewQP(a QPAttr) (*QP, error) {
	ca := C.struct_fake_qp_attr{
		qp_type:         C.int(a.Type),
		max_send_wr:     C.uint32_t(a.MaxSendWR),
		max_recv_wr:     C.uint32_t(a.MaxRecvWR),
		max_send_sge:    C.uint32_t(a.MaxSendSGE),
		max_recv_sge:    C.uint32_t(a.MaxRecvSGE),
		max_inline_data: C.uint32_t(a.MaxInline),
	}
	if a.SendCQ != nil {
		ca.send_cq = a.SendCQ.c
	}
	if a.RecvCQ != nil {
		ca.recv_cq = a.RecvCQ.c
	}
	if a.SRQ != nil {
		ca.srq = a.SRQ.c
	}
	if a.SigAll {
		ca.sq_sig_all = 1
	}
	c := C.fake_qp_new(p.c, &ca)
	if c == nil {
		return nil, errAlloc
	}
	return &QP{c: c}, nil
}

// Ptr returns the struct ibv_qp *.
func (q *QP) Ptr() unsafe.Pointer { return unsafe.Pointer(&q.c.ibqp) }

// Num is the QP number.
func (q *QP) Num() uint32 { return uint32(q.c.ibqp.qp_num) }

// SetSendMode and SetRecvMode choose what posted WRs do (Loopback by default).
func (q *QP) SetSendMode(m Mode) { q.c.sq.mode = C.int(m) }

// SetRecvMode: see SetSendMode.
func (q *QP) SetRecvMode(m Mode) { q.c.rq.mode = C.int(m) }

// FailSend makes the next ibv_post_send on this QP fail at chain index k with
// errno: the WRs before k are posted, *bad_wr is set to WR k, nothing after it
// is looked at. It fires once, at the first call whose chain reaches index k.
func (q *QP) FailSend(k int, errno syscall.Errno) { armFail(&q.c.sq, 0, k, errno) }

// FailSendCall is FailSend for the post call after the next skip calls (each
// rdma_post_*v is a call of its own).
func (q *QP) FailSendCall(skip, k int, errno syscall.Errno) { armFail(&q.c.sq, skip, k, errno) }

// FailRecv is FailSend for ibv_post_recv.
func (q *QP) FailRecv(k int, errno syscall.Errno) { armFail(&q.c.rq, 0, k, errno) }

// FailRecvCall is FailSendCall for ibv_post_recv.
func (q *QP) FailRecvCall(skip, k int, errno syscall.Errno) { armFail(&q.c.rq, skip, k, errno) }

// FailRecvCallNegative is FailRecvCall returning -errno, as rxe's provider
// does.
func (q *QP) FailRecvCallNegative(skip, k int, errno syscall.Errno) {
	armFail(&q.c.rq, skip, k, errno)
	q.c.rq.fail_errno = -q.c.rq.fail_errno
}

// FailSendDoorbell makes the next ibv_post_send on this QP queue every WR
// and then return ret (as is: a negative one too) without setting *bad_wr,
// as rxe's provider does when its doorbell fails. FailRecvDoorbell is the
// same for ibv_post_recv.
func (q *QP) FailSendDoorbell(ret int) { armDoorbell(&q.c.sq, 0, ret) }

// FailSendDoorbellCall is FailSendDoorbell for the post call after the next
// skip calls that queue every WR (each rdma_post_*v is a call of its own).
func (q *QP) FailSendDoorbellCall(skip, ret int) { armDoorbell(&q.c.sq, skip, ret) }

// FailRecvDoorbell: see FailSendDoorbell.
func (q *QP) FailRecvDoorbell(ret int) { armDoorbell(&q.c.rq, 0, ret) }

// FailRecvDoorbellCall is FailSendDoorbellCall for ibv_post_recv.
func (q *QP) FailRecvDoorbellCall(skip, ret int) { armDoorbell(&q.c.rq, skip, ret) }

// RecvCompletion says what loopback receive completions report.
type RecvCompletion struct {
	ByteLen uint32 // 0: the sum of the WR's SGE lengths
	WCFlags uint32 // e.g. IBV_WC_WITH_IMM; UD QPs add IBV_WC_GRH unless NoGRH
	Imm     uint32 // host order
	SrcQP   uint32 // 0: the receiving QP's number
	Opcode  int    // 0: IBV_WC_RECV
	// NoGRH: a UD receive reports a datagram that came without a GRH (one
	// from the local subnet on InfiniBand); its first 40 bytes are still
	// the GRH's room.
	NoGRH bool
}

// SetRecvCompletion sets what this QP's receive completions report.
func (q *QP) SetRecvCompletion(rc RecvCompletion) { setRecv(&q.c.recv, rc) }

// SendStats and RecvStats return a work queue's counters.
func (q *QP) SendStats() WQStats { return wqStats(&q.c.sq) }

// RecvStats: see SendStats.
func (q *QP) RecvStats() WQStats { return wqStats(&q.c.rq) }

// SendWQE returns a copy of the send queue's basic block at counter value i.
func (q *QP) SendWQE(i uint32) [WQEBytes]byte { return wqBB(&q.c.sq, i) }

// RecvWQE returns a copy of the receive queue's basic block at counter value i.
func (q *QP) RecvWQE(i uint32) [WQEBytes]byte { return wqBB(&q.c.rq, i) }

// SRQ is a fake shared receive queue.
type SRQ struct {
	c *C.struct_fake_srq
}

// NewSRQ makes an SRQ whose loopback completions go to cq.
func (p *Provider) NewSRQ(cq *CQ, maxWR, maxSGE int) (*SRQ, error) {
	var ccq *C.struct_fake_cq
	if cq != nil {
		ccq = cq.c
	}
	c := C.fake_srq_new(p.c, ccq, C.uint32_t(maxWR), C.uint32_t(maxSGE))
	if c == nil {
		return nil, errAlloc
	}
	return &SRQ{c: c}, nil
}

// Ptr returns the struct ibv_srq *.
func (s *SRQ) Ptr() unsafe.Pointer { return unsafe.Pointer(&s.c.ibsrq) }

// Num is the SRQ number.
func (s *SRQ) Num() uint32 { return uint32(s.c.srqn) }

// SetQPNum sets the QP number the SRQ's completions report.
func (s *SRQ) SetQPNum(qpn uint32) { s.c.qpn = C.uint32_t(qpn) }

// SetMode chooses what posted WRs do (Loopback by default).
func (s *SRQ) SetMode(m Mode) { s.c.rq.mode = C.int(m) }

// FailRecv is QP.FailSend for ibv_post_srq_recv.
func (s *SRQ) FailRecv(k int, errno syscall.Errno) { armFail(&s.c.rq, 0, k, errno) }

// FailRecvCall is QP.FailSendCall for ibv_post_srq_recv.
func (s *SRQ) FailRecvCall(skip, k int, errno syscall.Errno) { armFail(&s.c.rq, skip, k, errno) }

// FailRecvCallNegative is FailRecvCall returning -errno, as rxe's provider
// does.
func (s *SRQ) FailRecvCallNegative(skip, k int, errno syscall.Errno) {
	armFail(&s.c.rq, skip, k, errno)
	s.c.rq.fail_errno = -s.c.rq.fail_errno
}

// FailRecvDoorbellCall is QP.FailSendDoorbellCall for ibv_post_srq_recv.
func (s *SRQ) FailRecvDoorbellCall(skip, ret int) { armDoorbell(&s.c.rq, skip, ret) }

// SetRecvCompletion sets what this SRQ's completions report.
func (s *SRQ) SetRecvCompletion(rc RecvCompletion) { setRecv(&s.c.recv, rc) }

// Stats returns the SRQ's counters.
func (s *SRQ) Stats() WQStats { return wqStats(&s.c.rq) }

// WQE returns a copy of the SRQ's basic block at counter value i.
func (s *SRQ) WQE(i uint32) [WQEBytes]byte { return wqBB(&s.c.rq, i) }

// NewAH makes an address handle (a struct ibv_ah * with this context) for UD sends.
func (p *Provider) NewAH() (unsafe.Pointer, error) {
	ah := C.fake_ah_new(p.c)
	if ah == nil {
		return nil, errAlloc
	}
	return unsafe.Pointer(ah), nil
}

// NewCMID makes a struct rdma_cm_id * whose qp is q and whose srq is s
// (either may be nil), as rdma_create_ep would leave it.
func (p *Provider) NewCMID(q *QP, s *SRQ) (unsafe.Pointer, error) {
	var cq *C.struct_fake_qp
	var cs *C.struct_fake_srq
	if q != nil {
		cq = q.c
	}
	if s != nil {
		cs = s.c
	}
	id := C.fake_cm_id_new(p.c, cq, cs)
	if id == nil {
		return nil, errAlloc
	}
	return unsafe.Pointer(id), nil
}

// WQStats counts a work queue's activity.
type WQStats struct {
	Posted    uint64 // WRs accepted
	Doorbells uint64 // doorbell record writes: one per post call that accepted a WR
	Failed    uint64 // post calls that returned an error
	Head      uint32 // producer counter, in basic blocks
	Tail      uint32 // consumer counter, in basic blocks
	Size      uint32 // basic blocks in the ring
	// Doorbell is the value in the doorbell record (host order).
	Doorbell uint32
}

func wqStats(wq *C.struct_fake_wq) WQStats {
	return WQStats{
		Posted:    uint64(wq.posted),
		Doorbells: uint64(wq.doorbells),
		Failed:    uint64(wq.failed),
		Head:      uint32(wq.head),
		Tail:      uint32(wq.tail),
		Size:      uint32(wq.wqe_cnt),
		Doorbell:  be32(uint32(*wq.dbrec)),
	}
}

func wqBB(wq *C.struct_fake_wq, i uint32) [WQEBytes]byte {
	return *(*[WQEBytes]byte)(unsafe.Pointer(C.fake_wq_bb(wq, C.uint32_t(i))))
}

func armFail(wq *C.struct_fake_wq, skip, k int, errno syscall.Errno) {
	wq.fail_skip = C.uint32_t(skip)
	wq.fail_at = C.int(k)
	wq.fail_errno = C.int(errno)
}

func armDoorbell(wq *C.struct_fake_wq, skip, ret int) {
	wq.doorbell_skip = C.uint32_t(skip)
	wq.doorbell_fail = C.int(ret)
}

func setRecv(r *C.struct_fake_recv_cfg, rc RecvCompletion) {
	r.byte_len = C.uint32_t(rc.ByteLen)
	r.wc_flags = C.uint32_t(rc.WCFlags)
	r.imm = C.uint32_t(rc.Imm)
	r.src_qp = C.uint32_t(rc.SrcQP)
	r.no_grh = 0
	if rc.NoGRH {
		r.no_grh = 1
	}
	if rc.Opcode == 0 {
		r.opcode = C.IBV_WC_RECV
	} else {
		r.opcode = C.int(rc.Opcode)
	}
}

// be32 converts a big-endian value read as a host (little-endian) integer.
func be32(v uint32) uint32 {
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}
