package hand

// #include "hand.h"
import "C"

import (
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/generated/rdmacm"
	"github.com/goverbs/goverbs/generated/verbs"
)

// RecvChain is a reusable chain of receive work requests (struct
// ibv_recv_wr) and their scatter lists in C memory, posted with one cgo call
// by PostRecv, PostSRQRecv or PostRecvv.
//
// Reserve hands out the next WRs to fill; a post call posts every pending WR
// and, when all of them went through, empties the chain for the next round.
// The WRs are prelinked once (next and sg_list): the chain cuts the list
// after the last pending WR for the duration of a call.
type RecvChain struct {
	chain[verbs.RecvWR]
}

// NewRecvChain allocates a chain of up to capacity WRs (at most 2^24) of
// up to maxSGE scatter entries each (at most 2^16), in C memory. Close
// releases it.
func NewRecvChain(capacity, maxSGE int) (*RecvChain, error) {
	if !chainSizeOK(capacity, maxSGE) {
		return nil, syscall.EINVAL
	}
	wrSize := uintptr(capacity) * unsafe.Sizeof(verbs.RecvWR{})
	sgeSize := uintptr(capacity*maxSGE) * unsafe.Sizeof(verbs.SGE{})
	mem, err := cmalloc(wrSize + sgeSize + unsafe.Sizeof(uintptr(0)))
	if err != nil {
		return nil, err
	}
	c := &RecvChain{chain[verbs.RecvWR]{
		wr:     unsafe.Slice((*verbs.RecvWR)(mem), capacity),
		bad:    (**verbs.RecvWR)(unsafe.Add(mem, wrSize+sgeSize)),
		mem:    mem,
		maxSGE: maxSGE,
	}}
	sge := unsafe.Slice((*verbs.SGE)(unsafe.Add(mem, wrSize)), capacity*maxSGE)
	for i := range c.wr {
		if i+1 < capacity {
			c.wr[i].Next = &c.wr[i+1]
		}
		c.wr[i].SGList = &sge[i*maxSGE]
	}
	return c, nil
}

// Close releases the chain's C memory. Neither the chain nor a view Reserve
// returned may be used afterwards. Closing again does nothing. Close
// returns nil, or an error matching ErrConcurrentUse, having released
// nothing, when another goroutine is in a call of the chain.
func (c *RecvChain) Close() error {
	if err := c.close(usedRecvClose); err != nil {
		return err
	}
	c.use.exit()
	return nil
}

// Reserve appends k WRs to the pending ones and returns them for filling:
// every one of them must be filled (Set or SetSGL) before the next post,
// which posts them whatever they hold. It panics when fewer than k WRs are
// free, so no WR is ever dropped unnoticed. It does not allocate.
func (c *RecvChain) Reserve(k int) RecvWRs {
	v := RecvWRs{wr: c.wr[c.n : c.n+k : c.n+k], maxSGE: c.maxSGE}
	c.n += k
	return v
}

// WR returns WR i of the chain. Its Next and SGList belong to the chain: do
// not change them.
func (c *RecvChain) WR(i int) *verbs.RecvWR { return &c.wr[i] }

// RecvWRs is a view of WRs a RecvChain reserved, to fill in place. It is a
// small value meant to live in registers: filling through it costs what the
// same stores cost in C. It is valid until the chain's next post or Reset.
type RecvWRs struct {
	wr     []verbs.RecvWR
	maxSGE int
}

// Len is the number of WRs in the view.
func (v RecvWRs) Len() int { return len(v.wr) }

// Set fills WR i of the view with wrID and one scatter entry. It is inlined
// and does not allocate.
func (v RecvWRs) Set(i int, wrID uint64, sge SGE) {
	w := &v.wr[i]
	w.WRID = wrID
	w.NumSGE = 1
	*w.SGList = sge
}

// SetSGL fills WR i of the view with wrID and the scatter list sgl, copied
// into the chain. It panics when sgl is longer than the chain's maxSGE. It
// does not allocate.
func (v RecvWRs) SetSGL(i int, wrID uint64, sgl []SGE) {
	w := &v.wr[i]
	copy(unsafe.Slice(w.SGList, v.maxSGE)[:len(sgl)], sgl)
	w.WRID = wrID
	w.NumSGE = int32(len(sgl))
}

// WR returns WR i of the view, for direct use of the generated layout. Its
// Next and SGList belong to the chain: do not change them.
func (v RecvWRs) WR(i int) *verbs.RecvWR { return &v.wr[i] }

// PostRecv posts the pending WRs to qp's receive queue with one
// ibv_post_recv call; see PostRecvRaw for what a failure leaves. It returns
// ErrClosed once qp is closed (a post racing with Close either completes
// first or gets ErrClosed), and an *AttrError for a QP attached to an SRQ:
// such a QP's receives go to the SRQ (PostSRQRecv), as ibv_post_recv(3)
// requires. It does not allocate.
func (c *RecvChain) PostRecv(qp *QP) error {
	if err := qp.use(); err != nil {
		return err
	}
	if qp.raw.SRQ != nil {
		qp.done()
		return &AttrError{Op: "RecvChain.PostRecv", Field: "qp", Reason: "is attached to an SRQ: post its receives with PostSRQRecv"}
	}
	err := c.postRecv(qp.raw, usedPostRecv)
	qp.done() // not deferred: see Poller.poll
	return err
}

// PostSRQRecv is PostRecv for a shared receive queue (ibv_post_srq_recv).
func (c *RecvChain) PostSRQRecv(srq *SRQ) error {
	if err := srq.use(); err != nil {
		return err
	}
	err := c.postSRQRecv(srq.raw, usedPostSRQRecv)
	srq.done() // not deferred: see Poller.poll
	return err
}

// PostRecvv does what rdma_post_recvv does for each pending WR on conn's
// rdma_cm id, posting to the SRQ conn's QP was made with (ConnConfig.SRQ)
// if any; see PostRecvvRaw. It returns ErrClosed once conn is closed.
func (c *RecvChain) PostRecvv(conn *Conn) error {
	if err := conn.use(); err != nil {
		return err
	}
	err := c.postRecvv(conn.id, usedPostRecvv)
	conn.done() // not deferred: see Poller.poll
	return err
}

// PostRecvRaw posts the pending WRs to qp with one ibv_post_recv call. On
// success the chain is empty. On failure it returns a *PostError (see
// PostError for what was posted and what is left). It does not allocate.
//
// qp must be C memory (from ibv_create_qp or rdma_cm), like the chain: the
// call passes both to C as plain addresses, so that cgo does not check each
// pointer for Go pointers, which would cost as much as the crossing.
//
// A chain is for one goroutine at a time: a post that finds another
// goroutine in a call of the chain posts nothing and returns an error
// matching ErrConcurrentUse (so do all the post methods and Close).
func (c *RecvChain) PostRecvRaw(qp *verbs.QP) error { return c.postRecv(qp, usedPostRecvRaw) }

// postRecv is PostRecvRaw, returning used when the chain is in use.
func (c *RecvChain) postRecv(qp *verbs.QP, used *usedError) error {
	if !c.use.enter() {
		return used
	}
	if c.head == c.n {
		c.use.exit()
		return nil
	}
	rc := int32(C.goverbs_post_recv(cptr(unsafe.Pointer(qp)), cptr(unsafe.Pointer(&c.wr[c.head])),
		cptr(unsafe.Pointer(&c.wr[c.n-1])), cptr(unsafe.Pointer(c.bad))))
	if rc == 0 {
		c.head, c.n = 0, 0
		c.use.exit()
		return nil
	}
	err := c.failed("ibv_post_recv", errnoOf(rc))
	c.use.exit()
	return err
}

// PostSRQRecvRaw is PostRecvRaw for a shared receive queue
// (ibv_post_srq_recv); srq must be C memory (from ibv_create_srq), as qp for
// PostRecvRaw.
func (c *RecvChain) PostSRQRecvRaw(srq *verbs.SRQ) error {
	return c.postSRQRecv(srq, usedPostSRQRecvRaw)
}

func (c *RecvChain) postSRQRecv(srq *verbs.SRQ, used *usedError) error {
	if !c.use.enter() {
		return used
	}
	if c.head == c.n {
		c.use.exit()
		return nil
	}
	rc := int32(C.goverbs_post_srq_recv(cptr(unsafe.Pointer(srq)), cptr(unsafe.Pointer(&c.wr[c.head])),
		cptr(unsafe.Pointer(&c.wr[c.n-1])), cptr(unsafe.Pointer(c.bad))))
	if rc == 0 {
		c.head, c.n = 0, 0
		c.use.exit()
		return nil
	}
	err := c.failed("ibv_post_srq_recv", errnoOf(rc))
	c.use.exit()
	return err
}

// PostRecvvRaw does for each pending WR what rdma_post_recvv does on id: it
// posts a WR of its own with the WR's wr_id (the context that comes back as
// the completion's wr_id) and scatter list, to id's SRQ when the id has one
// (rdma_create_srq), else to its QP. When the id has none but its QP was
// made on an SRQ (ibv_create_qp with one, then rdma_create_qp... or hand's
// ConnConfig.SRQ), it posts to that SRQ with ibv_post_srq_recv, where
// rdma_post_recvv would post to the QP and fail. Unlike rdma_post_recvv it
// keeps the bad_wr the provider returns, so that a failure naming no WR
// comes back as a *PostError with Unknown set, for the one WR in doubt. It
// is one cgo call for the whole chain, stopping at the first failure with a
// *PostError like PostRecvRaw. It does not allocate.
func (c *RecvChain) PostRecvvRaw(id *rdmacm.CMID) error { return c.postRecvv(id, usedPostRecvvRaw) }

func (c *RecvChain) postRecvv(id *rdmacm.CMID, used *usedError) error {
	if !c.use.enter() {
		return used
	}
	if c.head == c.n {
		c.use.exit()
		return nil
	}
	r := C.goverbs_cm_post_recvv(cptr(unsafe.Pointer(id)), cptr(unsafe.Pointer(&c.wr[c.head])),
		C.int(c.n-c.head))
	if r == 0 {
		c.head, c.n = 0, 0
		c.use.exit()
		return nil
	}
	err := c.stopped("rdma_post_recvv", r)
	c.use.exit()
	return err
}
